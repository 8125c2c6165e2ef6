"""Bad use of the package gets a clear Python exception, never a crash:
each case names what was wrong."""

import numpy as np
import pytest
import torch

import grammard

import cases
from runs import sglang_backend, vllm_backend

BAD_SCHEMA = '{"type": "object", "minProperties": "x"}'


def test_connecting(daemon):
    with pytest.raises(grammard.NotFound, match=r'no tokenizer "nope".*llama3'):
        grammard.Client(daemon.target, "nope")
    with pytest.raises(grammard.Unavailable, match="300 ms"):
        grammard.Client("127.0.0.1:1", "llama3", connect_timeout=0.3)


def test_constraints_the_daemon_refuses(daemon):
    backend = vllm_backend(daemon)
    with pytest.raises(grammard.InvalidArgument, match="minProperties"):
        backend.compile_grammar("JSON", BAD_SCHEMA)
    with pytest.raises(grammard.InvalidArgument, match="not valid JSON"):
        backend.compile_grammar("JSON", "{")
    with pytest.raises(grammard.InvalidArgument, match="Lark"):
        backend.compile_grammar("GRAMMAR", "start: 'a'")
    with pytest.raises(grammard.InvalidArgument, match="unknown structured"):
        backend.compile_grammar("SQL", "")
    with pytest.raises(grammard.InvalidArgument, match="regex"):
        backend.compile_grammar("REGEX", "(")
    backend.destroy()


def test_tokens_and_bitmasks(daemon):
    backend = vllm_backend(daemon)
    g = backend.compile_grammar("REGEX", "a+")
    with pytest.raises(grammard.InvalidArgument, match="outside the vocab"):
        g.accept_tokens("r", [10**6])
    with pytest.raises(grammard.InvalidArgument, match="accepted 0"):
        g.rollback(3)
    words = backend.words
    with pytest.raises(grammard.InvalidArgument, match="needs 4008"):
        g.fill_bitmask(torch.zeros((2, 3), dtype=torch.int32), 0)
    with pytest.raises(grammard.InvalidArgument, match="int32"):
        g.fill_bitmask(torch.zeros((2, words), dtype=torch.float32), 0)
    with pytest.raises(grammard.InvalidArgument, match="1-D or 2-D"):
        g.fill_bitmask(torch.zeros((2, 2, words), dtype=torch.int32), 0)
    with pytest.raises(grammard.InvalidArgument, match="batch_index 5"):
        g.fill_bitmask(torch.zeros((2, words), dtype=torch.int32), 5)
    with pytest.raises(grammard.InvalidArgument, match="numpy array"):
        g.fill_bitmask([[0] * words], 0)
    bitmask = backend.allocate_token_bitmask(2)
    g.fill_bitmask(bitmask, 1)  # the right one works
    backend.destroy()
    with pytest.raises(grammard.FailedPrecondition, match="closed"):
        g.fill_bitmask(torch.zeros((2, words), dtype=torch.int32), 0)


def test_sglang_refusals(daemon, llama3):
    backend = sglang_backend(daemon)
    value = backend._init_value_dispatch(("json", BAD_SCHEMA))
    assert "minProperties" in value.error_message
    g = backend._init_value_dispatch(("regex", "a+"))
    mask = g.allocate_vocab_mask(backend.vocab_size, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    with pytest.raises(ValueError, match="refused token"):
        g.accept_token(cases.greedy_tokens(llama3, "b")[0])
    g.accept_token(cases.greedy_tokens(llama3, "a")[0])  # still usable
    with pytest.raises(grammard.InvalidArgument, match="idx 3"):
        g.fill_vocab_mask(mask, 3)
    with pytest.raises(grammard.InvalidArgument, match="smaller"):
        g.allocate_vocab_mask(1000, 1, "cpu")
    with pytest.raises(ValueError, match="unsupported grammar kind"):
        backend.dispatch_fallback("lark", "x")
    assert "unsupported" in backend._init_value_dispatch(
        ("lark", "x")).error_message
    backend.shutdown()


def test_client_calls_out_of_order(daemon):
    client = grammard.Client(daemon.target, "llama3")
    out = np.zeros((1, client.words_per_row), np.int32)
    with pytest.raises(grammard.FailedPrecondition, match="no step"):
        client.wait_masks(out)
    with pytest.raises(grammard.InvalidArgument, match="2 accepted lists"):
        client.submit_step([1], accepted=[[1], [2]])
    with pytest.raises(grammard.InvalidArgument, match="grammard.json_schema"):
        client.open(1, {"type": "object"})
    with pytest.raises(grammard.NotFound, match="not open"):
        client.close_sequence(99)
    client.open(1, grammard.regex("a"))
    with pytest.raises(grammard.AlreadyExists):
        client.open(1, grammard.regex("a"))
    client.close()
    client.close()  # idempotent
    with pytest.raises(grammard.FailedPrecondition, match="closed"):
        client.open(2, grammard.regex("a"))


def test_masks_of_the_wrong_kind():
    logits = torch.zeros(2, 64)
    mask = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(grammard.InvalidArgument, match="float32"):
        grammard.apply_mask_cpu(torch.zeros(2, 64, dtype=torch.int64), mask)
    with pytest.raises(grammard.InvalidArgument, match="int32"):
        grammard.apply_mask_cpu(logits, torch.zeros(2, 2))
    with pytest.raises(grammard.InvalidArgument, match="indices"):
        grammard.apply_mask_cpu(logits, mask, indices=[0])
    with pytest.raises(grammard.InvalidArgument):
        grammard.apply_mask_cpu(logits, mask, indices=[0, 0])
    with pytest.raises(grammard.InvalidArgument, match="on cuda"):
        grammard.apply_mask_cuda(logits, mask)
