"""The daemon SIGKILLed and restarted mid-generation: the client library
reconnects, re-opens and replays, and both adapters' outputs equal an
undisturbed run with the same seeds."""

import pytest

import grammard
from grammard import _stepper
from grammard.sglang import GrammardGrammarBackend
from grammard.vllm import GrammardBackend

import cases
from runs import SEEDS
from sglang_driver import SglangDriver
from vllm_driver import VllmDriver


def client_for(daemon):
    # Patient enough for a restart: reconnects within 30 s.
    return grammard.Client(daemon.target, "llama3", outage_timeout=30,
                           backoff_initial=0.02, backoff_max=0.2)


@pytest.mark.parametrize("engine,plugin", [("vllm", False), ("vllm", True),
                                           ("sglang", False)])
def test_outputs_survive_a_daemon_restart(fresh_daemon, llama3, reference,
                                          engine, plugin, monkeypatch):
    # Why any sequence failed: a restart must fail none, and when one does
    # the assertion names its error.
    failures = []
    fail = _stepper.Stepper._fail

    def record(self, s, err):
        failures.append(f"{s.sid}: {err}")
        fail(self, s, err)

    monkeypatch.setattr(_stepper.Stepper, "_fail", record)
    client = client_for(fresh_daemon)
    options = grammard.JsonOptions(whitespace="compact")
    model = cases.Model(llama3, client.vocab_size, client.eos_token_ids[0])
    if engine == "vllm":
        backend = GrammardBackend(None, None, client.vocab_size,
                                  client=client, json_options=options)
        driver = VllmDriver(backend, model, plugin=plugin)
        for kind, (spec, _) in cases.CASES.items():
            for seed in SEEDS:
                driver.add(f"{kind}/{seed}", kind, spec, seed)
    else:
        backend = GrammardGrammarBackend(None, client.vocab_size,
                                         client=client, json_options=options)
        driver = SglangDriver(backend, model)
        for kind, key in cases.SGLANG_KEYS.items():
            for seed in SEEDS:
                driver.add(f"{kind}/{seed}", key, seed)
    while driver.steps < 4:
        driver.step()
    assert not all(r.done for r in driver.requests.values())
    fresh_daemon.restart()
    driver.run()
    outputs = {rid: r.output for rid, r in driver.requests.items()}
    assert not failures, "\n".join(failures) + "\n" + fresh_daemon.log()
    assert outputs == reference
    m = client.metrics()
    assert m["reconnects"] >= 1 and m["replayed_sequences"] >= 1
    client.close()
