"""The adapters against the contract tables of grammard.contracts (method
names and parameters, as read from each engine's source at the commit the
table names); where an engine is installed, the tables against it too."""

import importlib
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
