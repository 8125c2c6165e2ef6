"""The adapters against the contract tables of grammard.contracts (method
names and parameters, as read from each engine's source at the commit the
table names); where an engine is installed, the tables against it too."""

import importlib
import importlib.util
import inspect

import pytest

from grammard import contracts, sglang, vllm

OURS = {
    "StructuredOutputGrammar": vllm.GrammardGrammar,
    "StructuredOutputBackend": vllm.GrammardBackend,
    "BaseGrammarObject": sglang.GrammardGrammar,
    "BaseGrammarBackend": sglang.GrammardGrammarBackend,
}


def params(fn):
    names = [p.name for p in inspect.signature(fn).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(names[1:] if names and names[0] == "self" else names)


def rows(table, static=frozenset()):
    for cls, methods in table.items():
        for name, expected in methods.items():
            yield cls, name, expected, (cls, name) in static


@pytest.mark.parametrize("cls,name,expected,static", [
    *rows(contracts.VLLM), *rows(contracts.SGLANG, contracts.SGLANG_STATIC)])
def test_adapter_matches_the_table(cls, name, expected, static):
    ours = OURS[cls]
    member = inspect.getattr_static(ours, name)
    if expected is None:
        # A property, or a plain attribute the engine reads and sets.
        assert isinstance(member, property) or not callable(member), \
            f"{cls}.{name} is an attribute"
        return
    assert callable(getattr(ours, name)), f"{cls}.{name} missing"
    assert isinstance(member, staticmethod) == static, name
    assert params(getattr(ours, name)) == expected


def test_sglang_factory_signature():
    assert params(sglang.create_backend) == contracts.SGLANG_FACTORY


def test_plugin_hooks_are_the_tables():
    from grammard import vllm_plugin
    import types
    manager = types.new_class("StructuredOutputManager")
    manager.grammar_init = lambda self, request: None
    manager.grammar_bitmask = (lambda self, requests,
                               structured_output_request_ids,
                               scheduled_spec_decode_tokens: None)
    vllm_plugin.patch_manager(manager)
    for name, expected in contracts.VLLM_HOOKS[
            "StructuredOutputManager"].items():
        assert params(getattr(manager, name)) == expected


ENGINE_MODULES = {
    "StructuredOutputGrammar": "vllm.v1.structured_output.backend_types",
    "StructuredOutputBackend": "vllm.v1.structured_output.backend_types",
    "BaseGrammarObject": "sglang.srt.constrained.base_grammar_backend",
    "BaseGrammarBackend": "sglang.srt.constrained.base_grammar_backend",
}


@pytest.mark.parametrize("cls", sorted(ENGINE_MODULES))
def test_table_matches_the_installed_engine(cls):
    try:
        module = importlib.import_module(ENGINE_MODULES[cls])
    except Exception:
        pytest.skip(f"SKIPPED: {ENGINE_MODULES[cls]} is not installed; the "
                    f"table stands as read ({contracts.VLLM_SOURCE if 'vllm' in ENGINE_MODULES[cls] else contracts.SGLANG_SOURCE})")
    engine = getattr(module, cls)
    table = {**contracts.VLLM, **contracts.SGLANG}[cls]
    for name, expected in table.items():
        assert hasattr(engine, name), f"{cls}.{name} is gone"
        if expected is not None:
            assert params(getattr(engine, name))[:len(expected)] == expected


def _engine_bases(monkeypatch):
    """Stand-ins for the engines' base classes, shaped as the tables say
    (abstract methods; SGLang's `finished` a property), installed where the
    adapters import them from."""
    import abc
    import sys
    import types

    def base(name, table, extra=None):
        ns = {m: abc.abstractmethod(lambda self, *a: None)
              for m, p in table.items() if p is not None}
        ns.update(extra or {})
        return abc.ABCMeta(name, (abc.ABC,), ns)

    finished = property(lambda self: self._finished,
                        lambda self, v: setattr(self, "_finished", v))
    modules = {
        "vllm.v1.structured_output.backend_types": {
            cls: base(cls, table) for cls, table in contracts.VLLM.items()},
        "sglang.srt.constrained.base_grammar_backend": {
            "BaseGrammarObject": base(
                "BaseGrammarObject",
                contracts.SGLANG["BaseGrammarObject"],
                {"finished": finished}),
            "BaseGrammarBackend": type("BaseGrammarBackend", (), {})},
    }
    for name in ("vllm", "vllm.v1", "vllm.v1.structured_output", "sglang",
                 "sglang.srt", "sglang.srt.constrained"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    return modules


def _load_again(module, name):
    """A second copy of an adapter module, imported now (the package's own
    copy is left alone)."""
    spec = importlib.util.spec_from_file_location(f"grammard.{name}",
                                                  module.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


def test_adapters_derive_from_the_installed_engines_bases(monkeypatch):
    import types
    import weakref
    bases = _engine_bases(monkeypatch)
    v = _load_again(vllm, "_vllm_with_engine")
    engine = bases["vllm.v1.structured_output.backend_types"]
    assert issubclass(v.GrammardGrammar, engine["StructuredOutputGrammar"])
    assert issubclass(v.GrammardBackend, engine["StructuredOutputBackend"])
    seq = types.SimpleNamespace(status=0)
    stepper = types.SimpleNamespace(accept=lambda s, tokens: s is seq,
                                    release=lambda s: None)
    g = v.GrammardGrammar(types.SimpleNamespace(stepper=stepper), seq)
    assert g.accept_tokens("r", [1])
    g.note = "engines may set their own attributes"
    assert weakref.ref(g)() is g

    s = _load_again(sglang, "_sglang_with_engine")
    engine = bases["sglang.srt.constrained.base_grammar_backend"]
    assert issubclass(s.GrammardGrammar, engine["BaseGrammarObject"])
    stepper = types.SimpleNamespace(new_sequence=lambda c, **k: seq,
                                    release=lambda s: None)
    backend = types.SimpleNamespace(stepper=stepper, jump_forward=False)
    g = s.GrammardGrammar(backend, b"")
    assert g.finished is False
    g.finished = True  # the slot, not the base's property
    assert g.finished and not hasattr(g, "_finished")
    assert weakref.ref(g)() is g
