"""The stepper that turns an engine's per-row calls into Decode steps:
against a real daemon, each behaviour the adapters rely on, and rows equal
to a brute-force reference on small grammars."""

import gc

import numpy as np
import pytest

import grammard
from grammard._stepper import FAILED, LIVE, TERMINATED, Stepper

import cases

EOS = 128001


@pytest.fixture
def stepper(daemon):
    s = Stepper(grammard.Client(daemon.target, "llama3"))
    yield s
    s.shutdown()


def seq(stepper, constraint):
    """A sequence of a grammar compiled first, as the adapters do (so that
    its first step finds it ready)."""
    stepper.client.compile(constraint)
    return stepper.new_sequence(constraint.encode())


def test_a_grammar_still_compiling_is_waited_for(stepper, llama3):
    a = stepper.new_sequence(grammard.regex("(ab|cd)+e").encode())
    row = stepper.row(a)  # stepped, found compiling, waited for, stepped
    assert cases.allowed(row, tokens(llama3, "ab")[0])


def tokens(llama3, text):
    return cases.greedy_tokens(llama3, text)


def test_accepts_and_rollbacks_become_one_step(stepper, llama3):
    a = seq(stepper, grammard.regex("(ab|cd)+"))
    b = seq(stepper, grammard.regex("x[0-9]+"))
    stepper.row(a)
    assert stepper.flushes == 1  # both opened and stepped at once
    stepper.row(b)
    assert stepper.flushes == 1
    assert stepper.accept(a, tokens(llama3, "ab"))
    assert stepper.accept(b, tokens(llama3, "x"))
    stepper.row(b)
    stepper.row(a)
    assert stepper.flushes == 2
    # A rollback past what was sent: the daemon rolls back at the next step.
    assert stepper.accept(a, tokens(llama3, "cd"))
    stepper.rollback(a, 2)  # "cd" (unsent) and "ab" (sent)
    row = stepper.row(a)
    assert stepper.flushes == 3
    assert cases.allowed(row, tokens(llama3, "ab")[0])
    assert not cases.allowed(row, EOS)  # back at the start: one pair needed
    with pytest.raises(grammard.InvalidArgument, match="accepted 0"):
        stepper.rollback(a, 1)


def test_announced_drafts_serve_the_speculative_loop(stepper, llama3):
    a = seq(stepper, grammard.regex("abcdef"))
    drafts = [tokens(llama3, c)[0] for c in "abc"]
    stepper.announce({a: drafts})
    stepper.row(a)
    assert stepper.flushes == 1
    for d in drafts:  # fill, accept the draft, fill, ...
        assert stepper.accept(a, [d])
        stepper.row(a)
    stepper.rollback(a, 3)
    assert stepper.validate(a, drafts) == 3
    assert stepper.validate(a, drafts[:2] + [EOS]) == 2
    assert stepper.flushes == 1
    # Drafts not announced cost a step of their own for validation.
    assert stepper.validate(a, [tokens(llama3, "x")[0]]) == 0
    assert stepper.flushes == 1  # the first row is held: no step needed
    assert stepper.validate(a, drafts[:1] + [tokens(llama3, "x")[0]]) == 1
    assert stepper.flushes == 1


def test_refusals(stepper, llama3):
    a = seq(stepper, grammard.choice(["yes", "no"]))
    b = seq(stepper, grammard.choice(["yes", "no"]))
    stepper.row(a)
    z = tokens(llama3, "z")[0]
    # A probe (SGLang's accept_token) is refused without harm ...
    assert not stepper.accept(a, [z], fail=False)
    assert a.status == LIVE and "not allowed" in a.error.message
    # ... a sampled token (vLLM's) ends the sequence: only EOS from now.
    assert not stepper.accept(b, [z])
    assert b.status == FAILED
    np.testing.assert_array_equal(stepper.row(b), stepper.eos_row)
    assert stepper.accept(b, [EOS]) and b.status == TERMINATED
    # Without the row (decoded into an engine's buffer), the daemon
    # refuses it at the next step.
    c = seq(stepper, grammard.choice(["yes", "no"]))
    out = np.zeros((3, stepper.words), np.uint32)
    stepper.fill_rows([a, c], out, [2, 0])
    assert stepper.accept(c, [z])  # no row held: taken on trust
    stepper.fill_rows([a, c], out, [2, 0])
    assert c.status == FAILED and "refused" in c.error.message
    np.testing.assert_array_equal(out[0], stepper.eos_row)
    with pytest.raises(grammard.InvalidArgument, match="outside"):
        stepper.accept(a, [10**9])


def test_batched_fill_decodes_in_place(stepper, llama3):
    seqs = [seq(stepper, grammard.regex(r)) for r in ("a+", "b+", "c+")]
    out = np.zeros((5, stepper.words), np.uint32)
    stepper.fill_rows(seqs, out, [4, 0, 2])
    assert stepper.flushes == 1
    # Rows decoded into the caller's buffer are not kept (an engine reuses
    # its buffer): asking for one again is a step of its own.
    expect = [stepper.row(s) for s in seqs]
    assert stepper.flushes == 4
    for r, e in zip([4, 0, 2], expect):
        np.testing.assert_array_equal(out[r], e)
    # Next step: one sequence left out of the batch still gets stepped,
    # then the batch is copied from the rows of that step.
    for s, c in zip(seqs, "abc"):
        assert stepper.accept(s, tokens(llama3, c))
    stepper.fill_rows(seqs[:2], out, [1, 3])
    assert stepper.flushes == 5
    assert cases.allowed(out[1], EOS) and cases.allowed(out[3], EOS)
    stepper.row(seqs[2])
    assert stepper.flushes == 5


def test_a_batch_decoded_in_place_lets_go_of_rows_held_before(stepper,
                                                               llama3):
    seqs = [seq(stepper, grammard.regex(r)) for r in ("a+", "b+")]
    for s in seqs:  # per-row fills: the step's rows are held
        stepper.row(s)
    assert len(stepper._rows_of) == 2
    for s, c in zip(seqs, "ab"):
        assert stepper.accept(s, tokens(llama3, c))
    out = np.zeros((2, stepper.words), np.uint32)
    stepper.fill_rows(seqs, out)  # row i for seqs[i]
    assert stepper.flushes == 2
    # The held rows are stale: kept, they would pin their buffer and send
    # every later accept down the slow path that checks held rows.
    assert not stepper._rows_of
    for r, c in zip(out, "ab"):
        assert cases.allowed(r, EOS) and cases.allowed(r, tokens(llama3,
                                                                 c)[0])


def test_columns_past_the_tokenizer_are_masked_in_filled_rows(stepper,
                                                              llama3):
    # A model's vocabulary may be wider than its tokenizer's: the extra
    # tokens are never allowed, in the rows filled and only there.
    seqs = [seq(stepper, grammard.regex(r)) for r in ("a+", "b+")]
    out = np.full((3, stepper.words + 2), 0xFFFFFFFF, np.uint32)
    stepper.fill_rows(seqs, out, [2, 0])  # first step: opens, not in place
    for s, c in zip(seqs, "ab"):
        assert stepper.accept(s, tokens(llama3, c))
    stepper.fill_rows(seqs, out)  # the common step, decoded in place
    assert (out[:, stepper.words:] == 0).all()
    assert cases.allowed(out[0], tokens(llama3, "a")[0])
    assert cases.allowed(out[1], tokens(llama3, "b")[0])
    out[:] = 0xFFFFFFFF
    for s, c in zip(seqs, "ab"):
        assert stepper.accept(s, tokens(llama3, c))
    stepper.fill_rows(seqs[1:], out, [2])
    assert (out[2, stepper.words:] == 0).all()
    assert (out[:2] == 0xFFFFFFFF).all()  # rows not filled are left alone


class _Unknown:
    """Stands for the Client's record of its own last step, which the
    stepper (submitting through the library) never writes."""

    def __len__(self):
        raise AssertionError("the Client's last step was read")


def test_a_step_left_in_flight_is_drained_by_its_own_size(stepper, llama3):
    seqs = [seq(stepper, grammard.regex(r)) for r in ("a+", "b+", "c+")]
    out = np.zeros((3, stepper.words), np.uint32)
    stepper.fill_rows(seqs, out)
    for s, c in zip(seqs, "abc"):
        assert stepper.accept(s, tokens(llama3, c))
    # The step's wait fails (a buffer too small), leaving it in flight.
    with pytest.raises(grammard.InvalidArgument):
        stepper.fill_rows(seqs, np.zeros((1, stepper.words), np.uint32))
    assert stepper.client.pending_rows() == 3
    stepper.client._ids = _Unknown()
    # The next step drains it (its 3 sequences' outcomes sized from the step
    # in flight) and is sent in its turn.
    for s, c in zip(seqs, "abc"):
        assert stepper.accept(s, tokens(llama3, c))
    stepper.fill_rows(seqs, out)
    for r, c in zip(out, "abc"):
        assert cases.allowed(r, tokens(llama3, c)[0]) and cases.allowed(r, EOS)


def test_released_sequences_close_at_the_next_step(stepper, llama3):
    a = seq(stepper, grammard.regex("a+"))
    b = seq(stepper, grammard.regex("b+"))
    stepper.row(a)
    assert stepper.accept(b, tokens(llama3, "b"))
    stepper.release(b)
    del b
    gc.collect()
    assert stepper.accept(a, tokens(llama3, "a"))
    stepper.row(a)  # b's accept is dropped, b closed on the stream
    assert len(stepper._live) == 1


@pytest.mark.parametrize("constraint,strings", [
    (grammard.choice(["yes", "no", "maybe", "not sure"]),
     ["yes", "no", "maybe", "not sure"]),
    (grammard.regex("(ab|cd){1,2}"),
     ["ab", "cd", "abab", "abcd", "cdab", "cdcd"]),
])
def test_rows_equal_a_brute_force_reference(stepper, llama3, constraint,
                                            strings):
    """Token t is allowed after text P iff P + bytes(t) starts one of the
    finite language's strings; EOS iff P is one of them."""
    words = [w.encode() for w in strings]
    vocab = stepper.vocab_size
    s = seq(stepper, constraint)
    prefix = b""
    walk = tokens(llama3, strings[-1])
    for step in range(len(walk) + 1):
        row = stepper.row(s)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab]
        expect = np.zeros(vocab, np.uint8)
        for t in range(vocab):
            b = llama3.bytes[t]
            if t in llama3.special:
                expect[t] = t == EOS and prefix in words
            elif b and any(w.startswith(prefix + b) for w in words):
                expect[t] = 1
        np.testing.assert_array_equal(bits, expect,
                                      err_msg=f"after {prefix!r}")
        if step < len(walk):
            assert stepper.accept(s, [walk[step]])
            prefix += llama3.bytes[walk[step]]
