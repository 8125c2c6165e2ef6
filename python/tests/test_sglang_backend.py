"""The SGLang adapter under SGLang's own call pattern (sglang_driver),
against a real daemon, over all six kinds of constraint: outputs valid and
equal to the vLLM adapter's (same model, same greedy choices), per-row and
batched fills alike, EAGLE-style draft chains, the cache handing out
copies, a bad schema aborting only its request and a refused token raising
ValueError."""

import pytest

import cases
from runs import run_sglang as run
from runs import sglang_backend as make_backend
from sglang_driver import SglangDriver


@pytest.fixture(scope="module")
def sglang_reference(daemon, llama3):
    outputs, _, _ = run(daemon, llama3)
    return outputs


def test_outputs_are_valid_and_match_the_vllm_adapter(sglang_reference,
                                                      reference, llama3):
    for rid, tokens in sglang_reference.items():
        kind = rid.split("/")[0]
        cases.CASES[kind][1](llama3.decode(tokens).decode("utf-8"))
        assert tokens == reference[rid], rid


def test_batched_fill_is_one_decode_step_per_scheduler_step(
        daemon, llama3, sglang_reference):
    outputs, (steps, flushes), _ = run(daemon, llama3, plugin=True)
    assert outputs == sglang_reference
    assert flushes == steps


def test_eagle_draft_chains(daemon, llama3, sglang_reference):
    outputs, (steps, _), _ = run(daemon, llama3, num_spec=3,
                                 reference=sglang_reference)
    assert outputs == sglang_reference
    assert steps < max(len(t) for t in sglang_reference.values())


def test_cache_hits_are_fresh_copies(daemon, llama3, sglang_reference):
    # The same keys again on one backend: the second round is served from
    # the cache, each request its own sequence from the start.
    backend = make_backend(daemon)
    model = cases.Model(llama3, backend.vocab_size,
                        backend.client.eos_token_ids[0])
    for round_ in range(2):
        driver = SglangDriver(backend, model)
        hits = 0
        for kind, key in cases.SGLANG_KEYS.items():
            r = driver.add(f"{kind}/1", key, 1)
            hits += r.grammar is not None
        driver.run()
        assert hits == (0 if round_ == 0 else len(cases.SGLANG_KEYS))
        for rid, r in driver.requests.items():
            assert r.output == sglang_reference[rid], rid
    backend.shutdown()


def test_bad_schema_and_refused_token(daemon, llama3, sglang_reference):
    bad = ("json", '{"type": "object", "minProperties": "x"}')
    no = cases.greedy_tokens(llama3, "zzz")[0]
    outputs, _, driver = run(daemon, llama3, extra=[("bad", bad)],
                             refuse={("CHOICE/1", 0): no})
    assert "minProperties" in driver.requests["bad"].aborted
    assert "refused" in driver.requests["CHOICE/1"].aborted
    for rid, tokens in outputs.items():
        assert tokens == sglang_reference[rid], rid


def test_the_kept_batch_mask_resets_rows_no_longer_filled(daemon, llama3):
    backend = make_backend(daemon)
    gs = [backend._init_value_dispatch(("regex", r)) for r in ("a+", "b+",
                                                               "c+")]
    mask = backend.batch_vocab_mask(gs, [0, 1, 2], 4, backend.vocab_size)
    assert not (mask[:3] == -1).all(dim=1).any()
    assert (mask[3] == -1).all()
    for g, c in zip(gs, "abc"):
        g.accept_token(cases.greedy_tokens(llama3, c)[0])
    again = backend.batch_vocab_mask([gs[0], gs[2]], [2, 0], 3,
                                     backend.vocab_size)
    assert again.shape[0] == 3
    assert (again[1] == -1).all()  # filled last step, not now
    assert not (again[0] == -1).all() and not (again[2] == -1).all()
    backend.shutdown()
