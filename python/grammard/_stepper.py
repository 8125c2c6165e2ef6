"""One Decode step per engine step, whatever order an engine's per-row calls
come in.

Engines talk to a grammar backend one request at a time: accept these
tokens, roll back k, fill row i of this bitmask, is it terminated. A
:class:`Stepper` records accepts, rollbacks and announced drafts as they
come, and at the first fill (or validation) that needs a row it does not
hold it *flushes*: one Decode step carrying every sequence whose state
changed since its last rows, written into one buffer. Later fills of the
step are served from those rows; a speculative loop (fill, accept a draft,
fill, ..., roll back) is served from the draft rows of an announced step
with no further round trip.

Rows are keyed by state without copying histories: a sequence remembers
the flush generation of its last change that its rows do not cover
(``mut_gen``); a flush's entry for it (generation ``gen``) is current while
``gen > mut_gen``, and accepting the next announced draft moves along the
entry's draft rows instead of invalidating it.

The common step (every sequence accepted one token, no rollback, no
drafts, nothing opened or closed) is built from two flat lists the accepts
append to, so a step costs O(1) Python operations plus the accepts
themselves; other steps group tokens per sequence.

Cost: an accept is a few dict and list operations (and, where the row is
held, one bit test); a flush is one C call pair (submit, wait) plus
O(sequences) list work in the uncommon case; the batch path of the common
step does per sequence only C-level list work (the ids of a batch are kept
while its composition holds).

Thread-safety, as both engines call their backends: accepts, rollbacks,
validations and fills come from one thread at a time, except that fills may
run concurrently with one another (vLLM's fill pool). A flush holds the
stepper's lock while it waits for the daemon, so concurrent fills of one
step wait for the one flush and then read its rows. The common accept takes
no lock (it never runs beside a flush). new_sequence and shutdown are safe
from any thread (vLLM compiles on a pool), and sequences are closed lazily
(at the next flush) so that a grammar object may be dropped on any thread,
even inside a garbage collection.
"""

from __future__ import annotations

import array
import ctypes
import itertools
import operator
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import errors
from .client import Client, State, StepResult

LIVE, TERMINATED, FAILED = 0, 1, 2

_STATUS = operator.attrgetter("status")

_NO_DRAFTS: Tuple[int, ...] = ()


class Seq:
    """One sequence's state in a Stepper (engines hold it through their
    grammar objects)."""

    __slots__ = ("sid", "constraint", "opened", "n", "mut_gen", "d_gen",
                 "d_depth", "rollback_due", "status", "error", "jump",
                 "jump_forward", "__weakref__")

    def __init__(self, sid: int, constraint: bytes, jump_forward: bool):
        self.sid = sid
        self.constraint = constraint
        self.opened = False
        self.n = 0              # tokens accepted, as the engine sees it
        self.mut_gen = 0        # see the module doc
        self.d_gen = -1         # the entry generation d_depth counts in
        self.d_depth = 0        # drafts of that entry accepted since
        self.rollback_due = 0   # tokens the daemon holds that go back
        self.status = LIVE
        self.error: Optional[errors.Error] = None
        self.jump: Tuple[bytes, List[int]] = (b"", [])
        self.jump_forward = jump_forward


# An entry of Stepper._rows_of: (buffer, first row, generation, drafts), the
# buffer the stepper's own. Rows decoded straight into an engine's tensor
# get no entry: the engine reuses its rows, so they are never read back.
_Entry = Tuple[np.ndarray, int, int, Tuple[int, ...]]


class Stepper:
    """Batches one Client's sequences into one Decode step per engine step
    (see the module doc)."""

    def __init__(self, client: Client, *, retry_timeout: float = 30.0):
        self.client = client
        self.words = client.words_per_row
        self.vocab_size = client.vocab_size
        self.eos = frozenset(client.eos_token_ids)
        self._lock = threading.Lock()
        self._sids = itertools.count(1)
        self._live: Dict[int, Seq] = {}
        self._gen = 0
        self._rows_of: Dict[int, _Entry] = {}
        self._acc_sids: List[int] = []   # one entry per accepted token ...
        self._acc_toks: List[int] = []   # ... and the token, in order
        self._dirty: Dict[int, Seq] = {}  # need rows for another reason
        self._drafts: Dict[int, Tuple[int, ...]] = {}  # announced
        self._closing: List[int] = []
        self._failed_last = False  # a sequence of the last flush failed
        self._closed = False
        self._jumpers = 0  # live sequences opened with jump_forward
        self._lib = client._lib
        # Arrays and addresses reused from step to step (see fill_rows).
        self._arange = np.arange(2, dtype=np.int64)
        self._arange_addr = _address(self._arange)
        self._codes = np.zeros(0, np.int32)
        self._flags = np.zeros(0, np.uint8)
        self._codes_addr = self._flags_addr = 0
        self._batch = None  # (seqs, ids, ids array, its address)
        self._grammars = None  # (grammars, their seqs): see live_batch
        self._out = (None, 0, 0, 0)  # (out, address, row stride, rows)
        self._retry_timeout = retry_timeout
        self.flushes = 0  # Decode steps sent (tests count them)
        eos_row = np.zeros(self.words, np.uint32)
        for t in self.eos:
            if 0 <= t < self.vocab_size:
                eos_row[t >> 5] |= np.uint32(1 << (t & 31))
        self.eos_row = eos_row

    # ----------------------------------------------------------- sequences

    def new_sequence(self, constraint: bytes, *,
                     jump_forward: bool = False) -> Seq:
        """A sequence at the start of `constraint` (a serialized
        grammard.v1.Constraint, compiled or not): opened on the stream at
        the first flush that needs it."""
        s = Seq(next(self._sids), constraint, jump_forward)
        with self._lock:
            self._live[s.sid] = s
            self._dirty[s.sid] = s
            self._jumpers += jump_forward
        return s

    def failed_sequence(self, error: errors.Error) -> Seq:
        """A sequence that failed before it opened: its rows allow only EOS
        and nothing is sent for it."""
        s = Seq(next(self._sids), b"", False)
        s.status = FAILED
        s.error = error
        return s

    def release(self, s: Seq) -> None:
        """The engine is done with `s`; closed at the next flush. Safe from
        any thread and from a finalizer (no lock taken)."""
        self._closing.append(s.sid)

    # ------------------------------------------------------------- accepts

    def accept(self, s: Seq, tokens: Sequence[int], *,
               fail: bool = True) -> bool:
        """Records accepted tokens. False when a held row refuses one: with
        `fail` the sequence then fails (its rows allow only EOS, so it
        ends), without it the refused token and those after it are simply
        not taken (a probe, as XGrammar's matcher treats it). Tokens past
        the held rows are checked by the daemon at the next flush, and a
        refusal there fails the sequence."""
        if len(tokens) == 1 and not s.status and s.sid not in self._rows_of:
            # The common accept (one live sequence, one token, no row held
            # to check it against), kept to a few operations and without
            # the lock: it runs once per request per engine step, and no
            # flush runs beside it (see the module doc).
            t = tokens[0]
            if (type(t) is int and 0 <= t < self.vocab_size
                    and t not in self.eos and not self._closed):
                # No mut_gen: with no row held, the next rows come from a
                # flush that carries this token.
                self._acc_sids.append(s.sid)
                self._acc_toks.append(t)
                s.n += 1
                return True
        with self._lock:
            if s.status or self._closed:  # not LIVE
                return self._accept_not_live(s, tokens)
            sid = s.sid
            vocab_size = self.vocab_size
            for t in tokens:
                t = int(t)
                if t < 0 or t >= vocab_size:
                    raise errors.InvalidArgument(
                        f"token {t} is outside the vocabulary of "
                        f"{vocab_size}")
                entry = self._rows_of.get(sid)
                if entry is not None and entry[2] > s.mut_gen:
                    if not self._held_allows(s, entry, t, fail):
                        return False
                else:
                    s.mut_gen = self._gen
                self._acc_sids.append(sid)
                self._acc_toks.append(t)
                s.n += 1
                if t in self.eos:
                    s.status = TERMINATED
            return True

    def _accept_not_live(self, s: Seq, tokens: Sequence[int]) -> bool:
        if self._closed:
            raise errors.FailedPrecondition("the client is closed")
        # A failed sequence may still end with EOS; a terminated one
        # accepts nothing more.
        ok = s.status == FAILED and len(tokens) == 1 and tokens[0] in self.eos
        if ok:
            s.status = TERMINATED
        return ok

    def _held_allows(self, s: Seq, entry: _Entry, t: int, fail: bool) -> bool:
        """Checks t against the row held for the sequence's state and moves
        along the entry's drafts (the state stays covered) or marks the
        state changed."""
        depth = s.d_depth if s.d_gen == entry[2] else 0
        row = entry[0][entry[1] + depth]
        if not (int(row[t >> 5]) >> (t & 31)) & 1:
            refused = errors.InvalidArgument(
                f"token {t} is not allowed here by the grammar")
            if fail:
                self._fail(s, refused)
            else:
                s.error = refused
            return False
        drafts = entry[3]
        if depth < len(drafts) and drafts[depth] == t:
            s.d_gen = entry[2]
            s.d_depth = depth + 1
        else:
            s.mut_gen = self._gen
        return True

    def rollback(self, s: Seq, k: int) -> None:
        """Undoes the last k accepted tokens."""
        if k < 0 or k > s.n:
            raise errors.InvalidArgument(
                f"rollback of {k} tokens; the sequence has accepted {s.n}")
        if k == 0:
            return
        with self._lock:
            s.n -= k
            if s.status == TERMINATED:
                s.status = LIVE
            # Unsent tokens go first: the speculative loop's are the last
            # appended.
            left = k
            sids, toks = self._acc_sids, self._acc_toks
            i = len(sids) - 1
            while left and i >= 0:
                if sids[i] == s.sid:
                    del sids[i]
                    del toks[i]
                    left -= 1
                i -= 1
            entry = self._rows_of.get(s.sid)
            if (left == 0 and entry is not None and s.d_gen == entry[2]
                    and s.d_depth >= k and entry[2] > s.mut_gen):
                s.d_depth -= k  # back along the entry's draft rows
            else:
                s.rollback_due += left
                s.mut_gen = self._gen
                self._dirty[s.sid] = s

    # ---------------------------------------------------------------- rows

    def _current(self, s: Seq) -> Optional[Tuple[np.ndarray, int]]:
        entry = self._rows_of.get(s.sid)
        if entry is None or entry[2] <= s.mut_gen:
            return None
        return entry[0], entry[1] + (s.d_depth if s.d_gen == entry[2] else 0)

    def row(self, s: Seq) -> np.ndarray:
        """The sequence's mask row for its current state (flushing if it is
        not held); EOS alone for a failed sequence."""
        with self._lock:
            if s.status == FAILED:
                return self.eos_row
            at = self._current(s)
            if at is None:
                self._dirty[s.sid] = s
                self._flush()
                if s.status == FAILED:
                    return self.eos_row
                at = self._current(s)
            return at[0][at[1]]

    def validate(self, s: Seq, tokens: Sequence[int]) -> int:
        """How many of `tokens` the grammar accepts in order from the
        current state, without advancing; fetches their rows (announcing
        them as drafts) when not held."""
        tokens = tuple(int(t) for t in tokens)
        with self._lock:
            if s.status != LIVE or not tokens:
                return 0
            entry = self._rows_of.get(s.sid)
            at = self._current(s)
            depth = s.d_depth if entry and s.d_gen == entry[2] else 0
            if (at is None
                    or entry[3][depth:depth + len(tokens) - 1]
                    != tokens[:len(tokens) - 1]):
                self._drafts[s.sid] = tokens
                self._dirty[s.sid] = s
                self._flush()
                if s.status != LIVE:
                    return 0
                at = self._current(s)
            buf, first = at
            for i, t in enumerate(tokens):
                if not 0 <= t < self.vocab_size:
                    return i
                if not (int(buf[first + i][t >> 5]) >> (t & 31)) & 1:
                    return i
            return len(tokens)

    def announce(self, drafts: Dict[Seq, Sequence[int]]) -> None:
        """Draft tokens the engine will verify next: the next flush asks
        for their rows too, so a speculative fill/accept loop over them
        needs no further round trip."""
        with self._lock:
            for s, d in drafts.items():
                d = tuple(int(t) for t in d)
                if s.status != LIVE or not d:
                    continue
                entry = self._rows_of.get(s.sid)
                depth = s.d_depth if entry and s.d_gen == entry[2] else 0
                if (entry is not None and entry[2] > s.mut_gen
                        and entry[3][depth:depth + len(d)] == d):
                    continue  # held already
                self._drafts[s.sid] = d
                self._dirty[s.sid] = s

    def live_batch(self, grammars: Sequence[Any],
                   check: Optional[Callable[[Sequence[Any]], bool]] = None
                   ) -> Optional[List[Seq]]:
        """The sequences of a batch of the adapters' grammar objects (each
        holds its sequence as `_seq`), or None when one of them is not live
        or, for a batch not seen last time, `check` refuses it. The list is
        kept while the batch's composition holds (engines step the same
        requests in the same order for many steps), so that a step does per
        request only C-level list work."""
        held = self._grammars
        if held is None or held[0] != grammars:
            if check is not None and not check(grammars):
                return None
            held = self._grammars = (list(grammars),
                                     [g._seq for g in grammars])
        seqs = held[1]
        return None if any(map(_STATUS, seqs)) else seqs

    def fill_rows(self, seqs: Sequence[Seq], out: np.ndarray,
                  rows: Optional[Sequence[int]] = None) -> None:
        """Writes each sequence's current row (uint32 words) into out[rows[i]]
        (out: 2-D, C-contiguous rows of at least `words` words; rows
        distinct; None: row i). When the step carries only sequences of this
        batch, the daemon's rows are decoded straight into `out`; otherwise
        they are flushed and copied. Columns past `words` (a model's
        vocabulary wider than the tokenizer's) are zeroed in those rows."""
        with self._lock:
            self._fill_rows(seqs, out, rows)
        if out.shape[1] > self.words:
            at = slice(0, len(seqs)) if rows is None else np.asarray(rows)
            out[at, self.words:] = 0

    def _fill_rows(self, seqs, out, rows) -> None:
        """fill_rows, lock held."""
        if self._closed:
            raise errors.FailedPrecondition("the client is closed")
        if self._closing:
            self._drop_closed()
        batch = self._batch
        if batch is None or batch[0] != seqs:
            # Engines step the same requests in the same order for many
            # steps: the batch's ids are made once per composition.
            ids = [s.sid for s in seqs]
            ids_a = np.array(ids, np.uint64)
            batch = self._batch = (list(seqs), ids, ids_a,
                                   _address(ids_a))
        ids = batch[1]
        if (ids == self._acc_sids and not self._dirty
                and not self._drafts):
            # The common step: every sequence of the batch accepted one
            # token, in batch order, and nothing else changed.
            accepted = array.array("i", self._acc_toks)  # int32
            self._acc_sids, self._acc_toks = [], []
            self._step(ids, accepted, self._offsets(len(ids)), None,
                       None, out, rows, batch[2:],
                       accepted.buffer_info()[0])
            if self._failed_last:
                self._copy_failed(seqs, out, rows)
            return
        if rows is None:
            rows = range(len(ids))
        wanted = set(ids)
        pending = set(self._acc_sids)
        pending.update(self._dirty)
        extra = wanted - pending
        if extra:  # not stepped this time: held rows, failed or ended
            for sid in extra:
                s = self._live.get(sid)
                if (s is not None and s.status == LIVE
                        and self._current(s) is None):
                    self._dirty[sid] = s
                    pending.add(sid)
            extra = wanted - pending
        if pending and pending <= wanted and not self._drafts:
            self._flush(out=out, out_rows=dict(zip(ids, rows)))
        elif pending:
            self._flush()
            extra = wanted
        if extra or self._failed_last:
            self._copy_failed(seqs, out, rows)

    def _copy_failed(self, seqs, out, rows) -> None:
        """Rows the last step did not decode in place: EOS alone for failed
        sequences, the held row for those not stepped or stepped again."""
        if rows is None:
            rows = range(len(seqs))
        for s, r in zip(seqs, rows):
            if s.status == FAILED:
                out[r, :self.words] = self.eos_row
                continue
            # Rows decoded in place have no entry (nor have ended
            # sequences); held ones and retried ones do.
            at = self._current(s)
            if at is not None:
                out[r, :self.words] = at[0][at[1]]

    # --------------------------------------------------------------- flush

    def _drop_closed(self) -> None:
        while self._closing:
            sid = self._closing.pop()
            s = self._live.pop(sid, None)
            if s is None:
                continue
            self._jumpers -= s.jump_forward
            self._rows_of.pop(sid, None)
            self._dirty.pop(sid, None)
            self._drafts.pop(sid, None)
            if s.opened and s.status != FAILED:
                try:
                    self.client.close_sequence(sid)
                except errors.Error:
                    pass  # the stream broke: the daemon forgot it anyway
            s.status = TERMINATED
            if sid in self._acc_sids:
                keep = [i for i, x in enumerate(self._acc_sids) if x != sid]
                self._acc_sids = [self._acc_sids[i] for i in keep]
                self._acc_toks = [self._acc_toks[i] for i in keep]

    def _flush(self, out: Optional[np.ndarray] = None,
               out_rows: Optional[Dict[int, int]] = None) -> Sequence[int]:
        """One Decode step for every sequence whose state changed (lock
        held); rows into a buffer of the stepper's, or with `out_rows`
        straight into `out`. Returns the ids stepped."""
        if self._closed:
            raise errors.FailedPrecondition("the client is closed")
        self._drop_closed()
        sids, toks = self._acc_sids, self._acc_toks
        live = self._live
        dirty = self._dirty
        if (not self._drafts and len(set(sids)) == len(sids)
                and not any(live[sid].rollback_due for sid in dirty)
                and not any(map(dirty.__contains__, sids))):
            # At most one token per sequence and nothing to roll back (the
            # common step, with new requests joining): the sequences with
            # a token first, then those without (no per-token grouping).
            m = len(sids)
            ids = sids + list(dirty)
            accepted = np.array(toks, np.int32)
            if dirty:
                offsets = np.minimum(np.arange(len(ids) + 1, dtype=np.int64),
                                     m)
                acc_offsets = (offsets, _address(offsets))
            else:
                acc_offsets = self._offsets(m)
            rollback = None
            draft_lists = None
        else:
            groups: Dict[int, List[int]] = {}
            for sid, t in zip(sids, toks):
                g = groups.get(sid)
                if g is None:
                    groups[sid] = [t]
                else:
                    g.append(t)
            for sid in self._dirty:
                groups.setdefault(sid, [])
            ids = [sid for sid in groups if live[sid].status != FAILED]
            lengths = [len(groups[sid]) for sid in ids]
            offsets = np.zeros(len(ids) + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            acc_offsets = (offsets, _address(offsets))
            accepted = np.array(
                list(itertools.chain.from_iterable(groups[sid]
                                                   for sid in ids)),
                np.int32)
            rollback = np.array([live[sid].rollback_due for sid in ids],
                                np.int32)
            draft_lists = ([self._drafts.get(sid, _NO_DRAFTS) for sid in ids]
                           if self._drafts else None)
        self._acc_sids, self._acc_toks = [], []
        dirty, self._dirty = self._dirty, {}
        self._drafts = {}
        self._failed_last = False
        if not ids:
            return ids
        for sid in dirty:
            s = live[sid]
            s.rollback_due = 0
            if not s.opened and s.status != FAILED:
                self.client.open(sid, s.constraint,
                                 jump_forward=s.jump_forward)
                s.opened = True
        self._step(ids, accepted, acc_offsets, rollback, draft_lists, out,
                   None if out_rows is None else
                   list(map(out_rows.__getitem__, ids)))
        return ids

    def _offsets(self, n: int) -> Tuple[np.ndarray, int]:
        """0, 1, ..., n (the accepted offsets of a step of one token each)
        and its address."""
        if len(self._arange) <= n:
            self._arange = np.arange(2 * n + 2, dtype=np.int64)
            self._arange_addr = _address(self._arange)
        return self._arange[:n + 1], self._arange_addr

    def _step(self, ids, accepted, acc_offsets, rollback, draft_lists, out,
              out_rows, batch=None, accepted_addr=None) -> None:
        """Sends one step and waits for it: rows into a new buffer of the
        stepper's (entries kept), or into `out` (nothing kept) at row i or,
        with `out_rows` (no drafts), at out_rows[i]. acc_offsets is
        (array, address); batch (ids array, address) and accepted_addr are
        given where cached. Calls the library directly: this is the
        per-step path, kept free of per-call numpy bookkeeping."""
        n = len(ids)
        if batch is None:
            ids_a = np.array(ids, np.uint64)
            ids_addr = _address(ids_a)
        else:
            ids_a, ids_addr = batch
        if accepted_addr is None:
            accepted_addr = _address(accepted)
        acc_offsets, offsets_addr = acc_offsets
        if draft_lists is None:
            d_offsets = drafts_a = None
            total = n
        else:
            counts = np.array([len(d) for d in draft_lists], np.int64)
            d_offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=d_offsets[1:])
            drafts_a = np.array(
                list(itertools.chain.from_iterable(draft_lists)), np.int32)
            total = n + int(d_offsets[-1])
        lib, handle = self._lib, self.client._h()
        args = (handle, n, ids_addr, _address(rollback), offsets_addr,
                accepted_addr, _address(d_offsets), _address(drafts_a))
        code = lib.grammard_client_submit_step(*args)
        if code == errors.FailedPrecondition.code and \
                self.client.pending_rows() > 0:
            # A wait that failed (a deadline, a buffer too small) left its
            # step in flight: its tokens count, its rows are stale. It was
            # sent by this stepper, not by Client.submit_step, so its
            # outcome arrays are sized from its rows (never fewer than its
            # sequences), not from the Client's record of its last step.
            pending = self.client.pending_rows()
            scratch = np.empty((pending, self.words), np.uint32)
            drained = (np.zeros(pending, np.int32),
                       np.zeros(pending, np.uint8))
            self.client._check(lib.grammard_client_wait_masks_at(
                handle, _address(scratch), self.words, pending, None, 0,
                _address(drained[0]), _address(drained[1])))
            code = lib.grammard_client_submit_step(*args)
        if code:
            self.client._check(code)
        self.flushes += 1
        self._gen += 1
        gen = self._gen
        if len(self._codes) < n:
            self._codes = np.zeros(2 * n, np.int32)
            self._flags = np.zeros(2 * n, np.uint8)
            self._codes_addr = _address(self._codes)
            self._flags_addr = _address(self._flags)
        codes, flags = self._codes[:n], self._flags[:n]
        if out is None:
            buf = np.empty((total, self.words), np.uint32)
            code = lib.grammard_client_wait_masks_at(
                handle, _address(buf), self.words, total, None, 0,
                self._codes_addr, self._flags_addr)
        else:
            buf = out
            target = self._out
            if target[0] is not out:
                target = self._out = (out, _address(out),
                                      out.strides[0] // 4, out.shape[0])
            row_map = (None if out_rows is None else
                       np.asarray(out_rows, np.int64))
            code = lib.grammard_client_wait_masks_at(
                handle, target[1], target[2], target[3], _address(row_map),
                0, self._codes_addr, self._flags_addr)
        if code:
            self.client._check(code)
        if out is not None and self._rows_of:
            # Rows held from an earlier flush are stale now; dropped, they
            # let the next accepts take the common path.
            pop = self._rows_of.pop
            for sid in ids:
                pop(sid, None)
        if out is None:
            firsts = (range(n) if draft_lists is None else
                      (np.arange(n, dtype=np.int64) + d_offsets[:-1]).tolist())
            entries = zip(itertools.repeat(buf), firsts,
                          itertools.repeat(gen),
                          itertools.repeat(_NO_DRAFTS) if draft_lists is None
                          else draft_lists)
            self._rows_of.update(zip(ids, entries))
        if codes.tobytes().strip(b"\0"):  # a sequence failed
            result = StepResult(ids_a, codes.copy(), flags.copy(), None,
                                None, self.client)
            self._failures(result, ids, accepted, acc_offsets, draft_lists)
            self._failed_last = True
        else:
            self._failed_last = False
        if self._jumpers:
            for i, sid in enumerate(ids):
                s = self._live[sid]
                if s.jump_forward and codes[i] == 0:
                    s.jump = self.client.jump_forward(i)

    def _failures(self, result, ids, accepted, acc_offsets,
                  draft_lists) -> None:
        """Sequences whose step failed: refused tokens end them (rows: EOS
        only); a grammar still compiling (a daemon restarted, a cache
        evicted) is waited for and the sequence stepped again."""
        retry = []
        for i in np.nonzero(result.codes)[0].tolist():
            sid = ids[i]
            s = self._live[sid]
            self._rows_of.pop(sid, None)
            err = result.error(i)
            if err.code == errors.Unavailable.code:
                a, b = int(acc_offsets[i]), int(acc_offsets[i + 1])
                retry.append((s, accepted[a:b].tolist(),
                              draft_lists[i] if draft_lists else _NO_DRAFTS))
                continue
            self._fail(s, err)
        if retry:
            self._retry(retry)

    def _retry(self, retry) -> None:
        ids = [s.sid for s, _, _ in retry]
        deadline = time.monotonic() + self._retry_timeout
        self.client.wait_ready(ids, timeout=self._retry_timeout)
        for s, _, _ in retry:
            state, err = self.client.state(s.sid)
            if state == State.FAILED:
                self._fail(s, err)
        retry = [r for r in retry if r[0].status != FAILED]
        if not retry or time.monotonic() > deadline:
            return
        for s, tokens, drafts in retry:
            self._acc_sids.extend([s.sid] * len(tokens))
            self._acc_toks.extend(tokens)
            self._dirty[s.sid] = s
            if drafts:
                self._drafts[s.sid] = drafts
        self._flush()

    def _fail(self, s: Seq, err: errors.Error) -> None:
        s.status = FAILED
        s.error = err
        self._rows_of.pop(s.sid, None)
        self._dirty.pop(s.sid, None)
        if s.opened:
            try:
                self.client.close_sequence(s.sid)
            except errors.Error:
                pass

    def shutdown(self) -> None:
        """Closes the client (the daemon forgets every sequence); later
        calls that need the daemon raise FailedPrecondition."""
        with self._lock:
            self._closed = True
            self._rows_of.clear()
            self.client.close()


def _address(a: Optional[np.ndarray]) -> Optional[int]:
    return None if a is None else a.__array_interface__["data"][0]


def copy_row(row: np.ndarray, dst_address: int, words: int) -> None:
    """Copies a row's first `words` words to an address (an engine tensor's
    row)."""
    ctypes.memmove(dst_address, row.ctypes.data, words * 4)
