"""The vLLM adapter under vLLM's own call pattern (vllm_driver), against a
real daemon, over all six request types: outputs valid, identical however
the manager fills (serial, 8 threads, batched by the plugin, speculative
with drafts), every row equal to the C++ client's, one Decode step per
engine step where the plugin batches, and a refused token ending its
request cleanly."""

import pytest

import cases
from runs import run_vllm as run


def check_outputs(outputs, llama3):
    for rid, tokens in outputs.items():
        kind = rid.split("/")[0]
        text = llama3.decode(tokens).decode("utf-8")
        cases.CASES[kind][1](text)


def test_every_request_type_generates_valid_text(reference, llama3):
    check_outputs(reference, llama3)


@pytest.mark.parametrize("mode", ["parallel", "plugin"])
def test_fill_paths_agree(daemon, llama3, reference, mode):
    outputs, (steps, flushes), _ = run(daemon, llama3,
                                       parallel=mode == "parallel",
                                       plugin=mode == "plugin")
    assert outputs == reference
    if mode == "plugin":
        assert flushes == steps  # one Decode step per engine step


@pytest.mark.parametrize("plugin", [False, True])
def test_speculative_drafts(daemon, llama3, reference, plugin):
    outputs, (steps, flushes), driver = run(
        daemon, llama3, num_spec=3, reference=reference, plugin=plugin,
        draft_seed=7)
    assert outputs == reference  # greedy: drafts change nothing but speed
    assert steps < max(len(t) for t in reference.values())  # drafts landed
    if plugin:
        # Drafts announced before validation: one step for the accepts and
        # every draft row, and the bitmask served from it.
        assert flushes == steps


@pytest.mark.parametrize("plugin", [False, True])
def test_a_refused_token_ends_its_request(daemon, llama3, reference, plugin):
    # Where the adapter holds the row it refuses the token itself (False);
    # where the plugin's batch went straight into the bitmask, the daemon
    # refuses it at the next step. Either way only EOS follows.
    no = cases.greedy_tokens(llama3, "zzz")[0]
    outputs, _, driver = run(daemon, llama3, plugin=plugin,
                             refuse={("CHOICE/1", 0): no})
    r = driver.requests["CHOICE/1"]
    assert r.refused or plugin
    assert r.done
    # It ended with EOS right after; the other requests went on untouched.
    assert outputs["CHOICE/1"] == ([] if r.refused else [no]) + [128001]
    for rid, tokens in outputs.items():
        if rid != "CHOICE/1":
            assert tokens == reference[rid], rid
