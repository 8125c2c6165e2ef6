"""Runs of the contract drivers against a daemon, shared by the tests: each
request type twice (two seeds), rows checked against the C++ client as
they are produced (vLLM), outputs and step counts returned."""

import grammard
from grammard.sglang import GrammardGrammarBackend
from grammard.vllm import GrammardBackend

import cases
from sglang_driver import SglangDriver
from vllm_driver import RowMirror, VllmDriver

SEEDS = (1, 2)


def vllm_backend(daemon):
    client = grammard.Client(daemon.target, "llama3")
    return GrammardBackend(None, None, client.vocab_size, client=client,
                           json_options=grammard.JsonOptions(
                               whitespace="compact"))


def run_vllm(daemon, llama3, **kwargs):
    backend = vllm_backend(daemon)
    model = cases.Model(llama3, backend.vocab_size,
                        backend.client.eos_token_ids[0])
    mirror = RowMirror(grammard.Client(daemon.target, "llama3"),
                       backend.client.words_per_row)
    driver = VllmDriver(backend, model, mirror=mirror, **kwargs)
    for kind, (spec, _) in cases.CASES.items():
        for seed in SEEDS:
            driver.add(f"{kind}/{seed}", kind, spec, seed)
    driver.run()
    assert mirror.compared > 0
    outputs = {rid: r.output for rid, r in driver.requests.items()}
    stats = (driver.steps, backend.stepper.flushes)
    backend.destroy()
    mirror.client.close()
    return outputs, stats, driver


def sglang_backend(daemon):
    client = grammard.Client(daemon.target, "llama3")
    return GrammardGrammarBackend(
        None, client.vocab_size, client=client,
        json_options=grammard.JsonOptions(whitespace="compact"))


def run_sglang(daemon, llama3, extra=(), **kwargs):
    backend = sglang_backend(daemon)
    model = cases.Model(llama3, backend.vocab_size,
                        backend.client.eos_token_ids[0])
    driver = SglangDriver(backend, model, **kwargs)
    for kind, key in cases.SGLANG_KEYS.items():
        for seed in SEEDS:
            driver.add(f"{kind}/{seed}", key, seed)
    for rid, key in extra:
        driver.add(rid, key, 1)
    driver.run()
    outputs = {rid: r.output for rid, r in driver.requests.items()
               if r.aborted is None}
    stats = (driver.steps, backend.stepper.flushes)
    backend.shutdown()
    return outputs, stats, driver
