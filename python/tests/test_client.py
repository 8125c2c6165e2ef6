"""grammard.Client, the C client library one call for one call, against a
real daemon: the README's loop, masks into numpy, torch and plain buffers,
rows at chosen destinations, masking host logits, compile ahead, listing
tokenizers, jump-forward, rank sync, metrics; and the constraint helpers
(every JsonOptions field reaches the daemon)."""

import json
import re

import numpy as np
import pytest
import torch

import grammard

import cases


def test_the_readme_loop(daemon, llama3):
    # The README's example, as written there (a schema; greedy sampling).
    with grammard.Client(daemon.target, "llama3") as client:
        schema = {"type": "object",
                  "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"], "additionalProperties": False}
        client.open(1, grammard.json_schema(schema, whitespace="compact"))
        client.wait_ready([1])
        masks = np.zeros((1, client.words_per_row), np.int32)
        logits = torch.zeros(1, client.vocab_size)
        tokens, text = [], []
        for _ in range(20):
            client.submit_step([1], accepted=[tokens])
            result = client.wait_masks(masks)
            assert result.ok(0)
            logits.normal_(generator=torch.Generator().manual_seed(len(text)))
            grammard.apply_mask_cpu(logits, masks)
            token = int(logits.argmax())
            text.append(token)
            tokens = [token]
            if token in client.eos_token_ids:
                break
        assert json.loads(llama3.decode(text)) in ({"ok": True},
                                                   {"ok": False})


def test_masks_land_in_any_buffer_and_at_chosen_rows(daemon):
    with grammard.Client(daemon.target, "llama3") as client:
        client.open(7, grammard.regex("[ab]+"))
        client.open(8, grammard.choice(["x", "yy"]))
        client.wait_ready([7, 8])
        w = client.words_per_row
        client.submit_step([7, 8])
        plain = np.zeros((2, w), np.uint32)
        client.wait_masks(plain)
        for out in (torch.zeros(4, w, dtype=torch.int32),
                    bytearray(4 * w * 4)):
            client.submit_step([7, 8])
            result = client.wait_masks(
                out if not isinstance(out, bytearray)
                else memoryview(out).cast("I", (4, w)), rows=[3, 1])
            assert list(result.codes) == [0, 0]
            got = (out.numpy().view(np.uint32) if hasattr(out, "numpy")
                   else np.frombuffer(out, np.uint32).reshape(4, w))
            np.testing.assert_array_equal(got[3], plain[0])
            np.testing.assert_array_equal(got[1], plain[1])
            assert not got[0].any() and not got[2].any()
        # Masks straight onto host logits (rows 1 and 0 of a 2-row batch).
        client.submit_step([7, 8])
        logits = torch.zeros(2, client.vocab_size, dtype=torch.bfloat16)
        client.wait_apply_cpu(logits, indices=[1, 0])
        for row, seq in ((1, 0), (0, 1)):
            bits = np.unpackbits(plain[seq].view(np.uint8),
                                 bitorder="little")[:client.vocab_size]
            assert torch.equal(torch.isinf(logits[row]),
                               torch.from_numpy(bits == 0))


def test_compile_list_jump_forward_sync_and_metrics(daemon, llama3):
    with grammard.Client(daemon.target, "llama3") as client:
        names = [t.name for t in client.list_tokenizers()]
        assert "llama3" in names
        assert client.eos_token_ids == (128001,)
        compiled = client.compile(grammard.regex("abc(d|e)"))
        assert compiled.state == grammard.State.READY
        assert len(compiled.grammar_id) == 32
        # Jump-forward: after "ab" the grammar forces "c".
        client.open(1, grammard.regex("abc(d|e)"), jump_forward=True)
        client.wait_ready([1])
        client.submit_step([1], accepted=[cases.greedy_tokens(llama3, "ab")])
        client.wait_masks(np.zeros((1, client.words_per_row), np.int32))
        forced, tokens = client.jump_forward(0)
        assert forced == b"c"
        assert llama3.decode(tokens) == b"c"
        # One rank agrees with itself.
        agreed = client.sync_readiness("g", 1, 0, 1, [1])
        assert agreed.ready == (1,) and agreed.failed == ()
        m = client.metrics()
        assert m["steps"] == 1 and m["step_latency"]["count"] == 1


def test_every_constraint_kind_and_json_option_reaches_the_daemon(daemon,
                                                                   llama3):
    schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    with grammard.Client(daemon.target, "llama3") as client:
        def first_text(constraint, steps=40):
            """The greedy text the constraint allows, preferring EOS, then
            newlines and spaces (so layout shows), then the lowest
            token."""
            client.open(1, constraint)
            client.wait_ready([1])
            state, err = client.state(1)
            assert err is None, err
            out, tokens = [], []
            mask = np.zeros((1, client.words_per_row), np.uint32)
            prefer = [*client.eos_token_ids, *(
                llama3.token(t) for t in ("\n", " ", ",", "}", "1"))]
            for _ in range(steps):
                client.submit_step([1], accepted=[tokens])
                client.wait_masks(mask)
                ok = [t for t in prefer if cases.allowed(mask[0], t)]
                token = ok[0] if ok else next(
                    t for t in range(client.vocab_size)
                    if cases.allowed(mask[0], t))
                if token in client.eos_token_ids:
                    break
                out.append(token)
                tokens = [token]
            client.close_sequence(1)
            return llama3.decode(out).decode()

        indented = first_text(grammard.json_schema(
            schema, whitespace="indented", indent=3))
        assert indented.startswith('{\n   "a"'), indented
        compact = first_text(grammard.json_schema(
            schema, whitespace="compact", item_separator=", ",
            key_separator=": "))
        assert compact.startswith('{"a": 1, "b"'), compact
        run = first_text(grammard.json_schema(schema, whitespace="any",
                                              max_whitespace_run=2))
        assert "\n\n\n" not in run and run.startswith("{\n\n"), run
        any_order = first_text(grammard.json_schema(
            schema, whitespace="compact", property_order="any"))
        assert json.loads(any_order) == {"a": 1, "b": 1}
        assert first_text(grammard.regex("a[0-9]")) == "a1"
        assert first_text(grammard.ebnf('start ::= "x" [0-9]',
                                         root_rule="start")) == "x1"
        assert first_text(grammard.choice('["no", "1"]')) == "1"
        assert json.loads(first_text(grammard.json_object(
            whitespace="compact"))) == {}
        tag = first_text(grammard.structural_tag(cases.STRUCTURAL_TAG))
        assert tag == "", tag  # EOS comes before any tag is opened
        # lenient drops what cannot be enforced instead of failing.
        odd = {"type": "object", "minProperties": "x"}
        with pytest.raises(grammard.InvalidArgument):
            client.compile(grammard.json_schema(odd))
        client.compile(grammard.json_schema(odd, lenient=True))


def test_constraint_helpers_refuse_bad_arguments():
    with pytest.raises(grammard.InvalidArgument, match="whitespace"):
        grammard.json_schema({}, whitespace="wide")
    with pytest.raises(grammard.InvalidArgument, match="property_order"):
        grammard.JsonOptions(property_order="alphabetical")
    with pytest.raises(grammard.InvalidArgument, match="indent"):
        grammard.JsonOptions(indent=-1)
    with pytest.raises(grammard.InvalidArgument, match="choice"):
        grammard.choice([])
    with pytest.raises(grammard.InvalidArgument, match="JSON list"):
        grammard.choice("yes")
    with pytest.raises(grammard.InvalidArgument, match="not both"):
        grammard.json_schema({}, options=grammard.JsonOptions(), indent=2)
    with pytest.raises(grammard.InvalidArgument, match="neither text"):
        grammard.json_schema({1, 2})
    assert isinstance(grammard.InvalidArgument("x"), ValueError)
    assert isinstance(grammard.DeadlineExceeded("x"), TimeoutError)
    assert re.match(r"\d+\.\d+\.\d+", grammard.__version__)
