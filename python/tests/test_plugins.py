"""The vLLM and SGLang plugins against stand-ins of the engine classes they
hook, written from the contracts (grammard.contracts): neither engine is
installed here. Each stand-in does what the engine's code does with a
backend; the test checks what the plugin changes: the backend the engine
ends up with, batches filled by one Decode step, drafts announced, requests
validated by grammard, and nothing changed without $GRAMMARD_TARGET."""

import concurrent.futures
import sys
import types

import numpy as np
import pytest
import torch

from grammard import sglang_plugin, vllm_plugin
from grammard.bench import _BatchInfo
from grammard.sglang import GrammardGrammar, GrammardGrammarBackend
from grammard.vllm import GrammardBackend

import cases

BAD_SCHEMA = '{"type": "object", "minProperties": "x"}'


def install(monkeypatch, modules):
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        for key, value in attrs.items():
            setattr(module, key, value)
        monkeypatch.setitem(sys.modules, name, module)


# ------------------------------------------------------------------ vLLM


class VllmConfig:
    class model_config:
        @staticmethod
        def get_vocab_size():
            return 128256

    class scheduler_config:
        max_num_seqs = 8

    speculative_config = None
    structured_outputs_config = types.SimpleNamespace(
        disable_any_whitespace=True)


class SORequest:
    def __init__(self, kind, spec):
        self.key = (kind, spec)
        self.grammar = None


class Request:
    def __init__(self, rid, kind, spec):
        self.request_id = rid
        self.structured_output_request = SORequest(kind, spec)


class Manager:
    """vLLM's StructuredOutputManager, as far as the plugin touches it."""

    def __init__(self, config):
        self.vllm_config = config
        self.backend = None
        self._grammar_bitmask = None
        self.executor = concurrent.futures.ThreadPoolExecutor(2)
        self.fills = 0

    def grammar_init(self, request):
        if self.backend is None:
            raise ValueError("unsupported structured output backend")
        so = request.structured_output_request
        so.grammar = self.executor.submit(self.backend.compile_grammar,
                                          *so.key).result()

    def should_fill_bitmask(self, request):
        return True

    def grammar_bitmask(self, requests, structured_output_request_ids,
                        scheduled_spec_decode_tokens):
        if self._grammar_bitmask is None:
            self._grammar_bitmask = self.backend.allocate_token_bitmask(
                self.vllm_config.scheduler_config.max_num_seqs * 4)
        row = 0
        for rid in structured_output_request_ids:
            g = requests[rid].structured_output_request.grammar
            drafts = scheduled_spec_decode_tokens.get(rid, [])
            advanced = 0
            for token in list(drafts) + [None]:
                g.fill_bitmask(self._grammar_bitmask, row)
                self.fills += 1
                row += 1
                if token is not None:
                    assert g.accept_tokens(rid, [token])
                    advanced += 1
            if advanced:
                g.rollback(advanced)
        return self._grammar_bitmask[:row].numpy()


class Scheduler:
    def __init__(self, manager, requests):
        self.structured_output_manager = manager
        self.requests = requests
        self.validated = {}

    def update_draft_token_ids(self, draft_token_ids):
        for rid, drafts in zip(draft_token_ids.req_ids,
                               draft_token_ids.draft_token_ids):
            g = self.requests[rid].structured_output_request.grammar
            self.validated[rid] = g.validate_tokens(drafts)


class InputProcessor:
    def _validate_structured_output(self, params):
        raise AssertionError("vLLM's own validation ran")


def install_vllm(monkeypatch):
    install(monkeypatch, {
        "vllm": {}, "vllm.v1": {},
        "vllm.v1.structured_output": {"StructuredOutputManager": Manager},
        "vllm.v1.core": {}, "vllm.v1.core.sched": {},
        "vllm.v1.core.sched.scheduler": {"Scheduler": Scheduler},
        "vllm.v1.engine": {},
        "vllm.v1.engine.input_processor": {"InputProcessor": InputProcessor},
    })
    for cls in (Manager, Scheduler, InputProcessor):
        for name in ("grammar_init", "grammar_bitmask",
                     "update_draft_token_ids", "_validate_structured_output"):
            original = cls.__dict__.get("_original_" + name)
            if original is not None:
                setattr(cls, name, original)
            elif name in cls.__dict__:
                setattr(cls, "_original_" + name, cls.__dict__[name])
        if "_grammard" in cls.__dict__:
            delattr(cls, "_grammard")


def test_vllm_plugin_does_nothing_without_a_target(monkeypatch):
    install_vllm(monkeypatch)
    monkeypatch.delenv("GRAMMARD_TARGET", raising=False)
    vllm_plugin.register()
    assert not getattr(Manager, "_grammard", False)


def test_vllm_plugin(monkeypatch, daemon, llama3):
    install_vllm(monkeypatch)
    monkeypatch.setenv("GRAMMARD_TARGET", daemon.target)
    monkeypatch.setenv("GRAMMARD_TOKENIZER", "llama3")
    vllm_plugin.register()
    vllm_plugin.register()  # twice: harmless
    manager = Manager(VllmConfig())
    requests = {f"r{i}": Request(f"r{i}", kind, spec)
                for i, (kind, (spec, _)) in enumerate(cases.CASES.items())}
    for r in requests.values():
        manager.grammar_init(r)
    backend = manager.backend
    assert isinstance(backend, GrammardBackend)
    assert backend.json_options.whitespace == "compact"  # from the config
    ids = list(requests)

    # No drafts: one batched fill, equal to vLLM's row-by-row fill.
    flushes = backend.stepper.flushes
    batched = manager.grammar_bitmask(requests, ids, {}).copy()
    assert manager.fills == 0 and backend.stepper.flushes == flushes + 1
    serial = Manager._original_grammar_bitmask(manager, requests, ids, {})
    np.testing.assert_array_equal(batched, serial)
    # With a reasoning parser, a request still reasoning allows everything.
    manager.reasoner = object()
    manager.should_fill_bitmask = lambda request: request is not requests["r0"]
    rows = manager.grammar_bitmask(requests, ids, {})
    assert (rows[0] == -1).all() and not (rows[1] == -1).all()
    np.testing.assert_array_equal(rows[1:], serial[1:])

    # Drafts: the scheduler's announcement makes validation and the
    # manager's serial loop one Decode step.
    r0 = requests["r3"].structured_output_request.grammar  # GRAMMAR
    first = cases.greedy_tokens(llama3, "12+3")
    assert r0.accept_tokens("r3", first[:1])
    scheduler = Scheduler(manager, requests)
    flushes = backend.stepper.flushes
    scheduler.update_draft_token_ids(types.SimpleNamespace(
        req_ids=["r3"], draft_token_ids=[first[1:]]))
    assert scheduler.validated["r3"] == first[1:]
    manager.grammar_bitmask(requests, ["r3"], {"r3": first[1:]})
    assert backend.stepper.flushes == flushes + 1

    # Request validation goes to grammard.
    processor = InputProcessor()
    params = types.SimpleNamespace(structured_outputs=types.SimpleNamespace(
        json={"type": "object"}))
    assert processor._validate_structured_output(params) is None
    params.structured_outputs.json = BAD_SCHEMA
    with pytest.raises(ValueError, match="minProperties"):
        processor._validate_structured_output(params)

    # A constraint that fails in the engine ends its request instead of
    # raising there.
    bad = Request("bad", "JSON", BAD_SCHEMA)
    manager.grammar_init(bad)
    g = bad.structured_output_request.grammar
    bitmask = backend.allocate_token_bitmask(1)
    g.fill_bitmask(bitmask, 0)
    allowed = np.flatnonzero(np.unpackbits(
        bitmask[0].numpy().view(np.uint8), bitorder="little"))
    assert allowed.tolist() == [128001]
    backend.destroy()


# ---------------------------------------------------------------- SGLang


class SamplingBatchInfo(_BatchInfo):
    """SGLang's SamplingBatchInfo as far as the plugin touches it (the
    benchmark's stand-in, which does what SGLang's own mask update does),
    noting whether SGLang's code ran."""

    original_ran = False

    def update_regex_vocab_mask(self):
        self.original_ran = True
        super().update_regex_vocab_mask()


def test_sglang_plugin(monkeypatch, daemon):
    registry = {}
    choices = []
    install(monkeypatch, {
        "sglang": {}, "sglang.srt": {}, "sglang.srt.constrained": {},
        "sglang.srt.constrained.base_grammar_backend": {
            "GRAMMAR_BACKEND_REGISTRY": registry,
            "register_grammar_backend":
                lambda name, fn: registry.__setitem__(name, fn)},
        "sglang.srt.server_args": {
            "add_grammar_backend_choices": choices.extend},
        "sglang.srt.sampling": {},
        "sglang.srt.sampling.sampling_batch_info": {
            "SamplingBatchInfo": SamplingBatchInfo},
    })
    original = SamplingBatchInfo.update_regex_vocab_mask
    monkeypatch.setattr(SamplingBatchInfo, "update_regex_vocab_mask",
                        original)
    monkeypatch.setenv("GRAMMARD_TARGET", daemon.target)
    monkeypatch.setenv("GRAMMARD_TOKENIZER", "llama3")
    sglang_plugin.register()
    sglang_plugin.register()
    assert choices == ["grammard"]
    args = types.SimpleNamespace(constrained_json_disable_any_whitespace=True)
    backend = registry["grammard"](args, None, 128256, {128001})
    assert isinstance(backend, GrammardGrammarBackend)
    assert backend.json_options.whitespace == "compact"
    grammars = [backend._init_value_dispatch(key)
                for key in cases.SGLANG_KEYS.values()]
    assert all(isinstance(g, GrammardGrammar) for g in grammars)

    info = SamplingBatchInfo([grammars[0], None, *grammars[1:]], 128256)
    flushes = backend.stepper.flushes
    info.update_regex_vocab_mask()
    assert not info.original_ran
    assert backend.stepper.flushes == flushes + 1
    batched = info.vocab_mask.clone()
    assert (batched[1] == -1).all()  # not constrained: everything allowed
    # The same rows as SGLang's per-request fill.
    copies = [g.copy() for g in grammars]
    reference = SamplingBatchInfo([copies[0], None, *copies[1:]], 128256)
    original(reference)
    assert torch.equal(batched, reference.vocab_mask)
    logits = torch.zeros(len(info.grammars), 128256)
    info.apply_mask_func(logits=logits, vocab_mask=info.vocab_mask)
    assert torch.isinf(logits[0]).any() and not torch.isinf(logits[1]).any()

    # A batch with another backend's grammar runs SGLang's own code.
    class Foreign:
        finished = False

        def is_terminated(self):
            return False

        def allocate_vocab_mask(self, vocab_size, batch_size, device):
            return torch.full((batch_size, (vocab_size + 31) // 32), -1,
                              dtype=torch.int32)

        def fill_vocab_mask(self, mask, idx):
            pass

        @staticmethod
        def move_vocab_mask(mask, device):
            return mask

        apply_vocab_mask = None

    mixed = SamplingBatchInfo([Foreign(), grammars[0]], 128256)
    mixed.update_regex_vocab_mask()
    assert mixed.original_ran
    backend.shutdown()
