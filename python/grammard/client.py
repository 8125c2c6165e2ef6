"""grammard.Client: the C client library (client/grammard_client.h), one call
for one call. ::

    import grammard, numpy as np
    with grammard.Client("127.0.0.1:50051", "llama3") as client:
        client.open(1, grammard.json_schema({"type": "object"}))
        client.wait_ready([1])
        masks = np.zeros((1, client.words_per_row), np.int32)
        tokens = []
        while True:
            client.submit_step([1], accepted=[tokens])
            ...  # the forward pass
            result = client.wait_masks(masks)
            ...  # mask the logits with masks[0], sample `token`
            tokens = [token]

The client survives a daemon restart: it reconnects, re-opens its
sequences and replays their tokens (client/client.h). Every failure raises
a grammard.Error subclass carrying the gRPC code and the daemon's message.

Thread-safety: as the C library's: any thread may call; open, close,
submit_step and the waits are serialised. Each call releases the GIL while
it runs.
"""

from __future__ import annotations

import ctypes
import enum
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _buffers, _native
from .constraints import Constraint
from .errors import FailedPrecondition, InvalidArgument, error_for


class State(enum.IntEnum):
    COMPILING = _native.STATE_COMPILING
    READY = _native.STATE_READY
    FAILED = _native.STATE_FAILED


@dataclass(frozen=True)
class TokenizerInfo:
    name: str
    fingerprint: str
    vocab_size: int
    eos_token_ids: Tuple[int, ...]


@dataclass(frozen=True)
class CompileResult:
    grammar_id: str
    state: State


@dataclass(frozen=True)
class Readiness:
    """The agreed readiness of a rank group (sync_readiness)."""

    ready: Tuple[int, ...]
    failed: Tuple[int, ...]


@dataclass
class DeviceLogits:
    """Logits in device memory described by hand (for callers whose arrays
    are not torch CUDA tensors): `pointer` to rows x vocab elements of
    `dtype` ("float32", "float16", "bfloat16"), rows `row_stride` elements
    apart (0: vocab)."""

    pointer: int
    dtype: str
    rows: int
    vocab: int
    row_stride: int = 0


@dataclass
class StepResult:
    """A waited step: per sequence, in the order submitted, its status code
    (0, or the gRPC code of its failure: its rows are then all allowed) and
    flags, and where its rows start among the step's rows."""

    ids: np.ndarray
    codes: np.ndarray
    flags: np.ndarray
    first_rows: np.ndarray
    num_rows: np.ndarray
    _client: Any = field(repr=False, default=None)

    def __len__(self) -> int:
        return len(self.ids)

    def ok(self, i: int) -> bool:
        return self.codes[i] == 0

    def terminated(self, i: int) -> bool:
        return bool(self.flags[i] & _native.FLAG_TERMINATED)

    def can_terminate(self, i: int) -> bool:
        return bool(self.flags[i] & _native.FLAG_CAN_TERMINATE)

    def error(self, i: int):
        """Sequence i's failure as an Error (None when it stepped): the
        daemon's message is the sequence's state's."""
        if self.codes[i] == 0:
            return None
        message = f"sequence {int(self.ids[i])} failed this step"
        if self._client is not None:
            try:
                state, err = self._client.state(int(self.ids[i]))
                if err is not None:
                    message = err.message
                elif state == State.COMPILING:
                    message = (f"sequence {int(self.ids[i])}: its grammar "
                               f"is still compiling")
            except Exception:  # closed since: keep the generic message
                pass
        return error_for(int(self.codes[i]), message)


def _ms(seconds: Optional[float]) -> int:
    return 0 if seconds is None else max(1, int(seconds * 1000))


class Client:
    """One Decode stream to grammard for one tokenizer (see the module)."""

    def __init__(self, target: str, tokenizer: str, *, tls: bool = False,
                 tls_ca_file: Optional[str] = None,
                 tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None,
                 auth_token_file: Optional[str] = None,
                 connect_timeout: Optional[float] = None,
                 step_timeout: Optional[float] = None,
                 outage_timeout: Optional[float] = None,
                 backoff_initial: Optional[float] = None,
                 backoff_max: Optional[float] = None):
        self._lib = _native.lib()
        enc = (lambda s: s.encode("utf-8") if s else None)
        options = _native.Options(
            target=enc(target), tokenizer=enc(tokenizer), tls=int(tls),
            tls_ca_file=enc(tls_ca_file),
            connect_timeout_ms=_ms(connect_timeout),
            step_timeout_ms=_ms(step_timeout),
            outage_timeout_ms=_ms(outage_timeout),
            backoff_initial_ms=_ms(backoff_initial),
            backoff_max_ms=_ms(backoff_max),
            tls_cert_file=enc(tls_cert_file), tls_key_file=enc(tls_key_file),
            auth_token_file=enc(auth_token_file))
        handle = ctypes.c_void_p()
        code = self._lib.grammard_client_connect(ctypes.byref(options),
                                                 ctypes.byref(handle))
        self._handle = handle.value
        if code != 0:
            message = (self._lib.grammard_client_last_error(self._handle)
                       .decode("utf-8", "replace"))
            self._lib.grammard_client_destroy(self._handle)
            self._handle = None
            raise error_for(code, message)
        self.target = target
        self.tokenizer = tokenizer
        self.vocab_size = self._lib.grammard_client_vocab_size(self._handle)
        self.words_per_row = self._lib.grammard_client_words_per_row(
            self._handle)
        n = self._lib.grammard_client_eos_token_ids(self._handle, None, 0)
        eos = (ctypes.c_int32 * max(1, n))()
        self._lib.grammard_client_eos_token_ids(self._handle, eos, n)
        self.eos_token_ids = tuple(eos[:n])
        self._ids = np.zeros(0, np.uint64)  # the step in flight
        self._rows = np.zeros(0, np.int32)

    # --------------------------------------------------------------- basics

    def _h(self):
        if self._handle is None:
            raise FailedPrecondition("the client is closed")
        return self._handle

    def _check(self, code: int) -> None:
        if code != 0:
            raise error_for(code, self._lib.grammard_client_last_error(
                self._handle).decode("utf-8", "replace"))

    def close(self) -> None:
        """Ends the stream (the daemon forgets its sequences). Idempotent."""
        if self._handle is not None:
            self._lib.grammard_client_destroy(self._handle)
            self._handle = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def closed(self) -> bool:
        return self._handle is None

    # ------------------------------------------------------------ sequences

    def open(self, sequence_id: int, constraint: Any, *,
             think_end_token: Optional[int] = None,
             jump_forward: bool = False) -> None:
        """Opens a sequence; its grammar compiles in the background (state,
        wait_ready). With think_end_token the sequence starts in a reasoning
        section that token ends; with jump_forward each step reports what the
        grammar forces next (jump_forward)."""
        data = _constraint_bytes(constraint, "open")
        options = _native.OpenOptions(
            -1 if think_end_token is None else int(think_end_token),
            int(jump_forward))
        self._check(self._lib.grammard_client_open_with(
            self._h(), int(sequence_id), data, len(data),
            ctypes.byref(options)))

    def close_sequence(self, sequence_id: int) -> None:
        self._check(self._lib.grammard_client_close(self._h(),
                                                    int(sequence_id)))

    def state(self, sequence_id: int):
        """(State, Error or None) of a sequence; never blocks."""
        out = ctypes.c_int32()
        self._check(self._lib.grammard_client_state(self._h(),
                                                    int(sequence_id),
                                                    ctypes.byref(out)))
        state = State(out.value)
        if state == State.FAILED:
            message = self._lib.grammard_client_last_error(
                self._handle).decode("utf-8", "replace")
            return state, _sequence_error(message)
        return state, None

    def wait_ready(self, ids: Iterable[int],
                   timeout: Optional[float] = None) -> None:
        """Blocks until every id is ready or failed (state tells which)."""
        a = np.ascontiguousarray(list(ids), dtype=np.uint64)
        self._check(self._lib.grammard_client_wait_ready(
            self._h(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
            len(a), _ms(timeout)))

    def compile(self, constraint: Any, *, wait: bool = True,
                timeout: Optional[float] = None) -> CompileResult:
        """Compiles a constraint ahead of its sequences (a call of its own: a
        step in flight goes on). Raises the grammar's error when it fails
        (InvalidArgument naming the keyword, ...). Rides out a daemon restart
        up to outage_timeout, as a step does."""
        data = _constraint_bytes(constraint, "compile")
        gid = ctypes.create_string_buffer(65)
        state = ctypes.c_int32()
        self._check(self._lib.grammard_client_compile(
            self._h(), data, len(data), int(wait), _ms(timeout), gid,
            len(gid), ctypes.byref(state)))
        return CompileResult(gid.value.decode(), State(state.value))

    def list_tokenizers(self) -> List[TokenizerInfo]:
        needed = ctypes.c_size_t()
        self._lib.grammard_client_list_tokenizers(self._h(), None, 0,
                                                  ctypes.byref(needed))
        buf = ctypes.create_string_buffer(needed.value + 1)
        self._check(self._lib.grammard_client_list_tokenizers(
            self._h(), buf, len(buf), ctypes.byref(needed)))
        return [TokenizerInfo(t["name"], t["fingerprint"], t["vocab_size"],
                              tuple(t["eos_token_ids"]))
                for t in json.loads(buf.value.decode("utf-8"))]

    # ---------------------------------------------------------------- steps

    def submit_step(self, ids: Sequence[int],
                    accepted: Optional[Sequence[Sequence[int]]] = None,
                    rollback: Optional[Sequence[int]] = None,
                    drafts: Optional[Sequence[Sequence[int]]] = None) -> None:
        """Sends a step without waiting: for each sequence of `ids` (its
        rows come back in this order), roll back rollback[i] tokens, accept
        accepted[i], and ask for 1 + len(drafts[i]) rows."""
        n = len(ids)
        ids_a = np.ascontiguousarray(ids, dtype=np.uint64)
        if ids_a.ndim != 1:
            raise InvalidArgument("submit_step: ids must be a list of ints")
        acc_off, acc = _flatten(accepted, n, "accepted")
        dr_off, dr = (_flatten(drafts, n, "drafts") if drafts is not None
                      else (None, None))
        rb = _buffers.int32_array(rollback, "rollback", n)
        self.submit_arrays(ids_a, acc_off, acc, rb, dr_off, dr)

    def submit_arrays(self, ids: np.ndarray, accepted_offsets: np.ndarray,
                      accepted: np.ndarray,
                      rollback: Optional[np.ndarray] = None,
                      draft_offsets: Optional[np.ndarray] = None,
                      drafts: Optional[np.ndarray] = None) -> None:
        """submit_step on flat arrays (the C library's layout, for callers
        that keep them): ids uint64; accepted int32 with int64 offsets
        (n + 1 entries); optional int32 rollback; drafts likewise."""
        n = len(ids)
        ptr = (lambda a: None if a is None else a.ctypes.data)
        self._check(self._lib.grammard_client_submit_step(
            self._h(), n, ptr(ids), ptr(rollback), ptr(accepted_offsets),
            ptr(accepted), ptr(draft_offsets), ptr(drafts)))
        self._ids = ids
        if draft_offsets is None:
            self._rows = np.ones(n, np.int32)
        else:
            self._rows = (np.diff(draft_offsets) + 1).astype(np.int32)

    def pending_rows(self) -> int:
        """Rows of the step in flight (1 + drafts per sequence); 0 when
        none."""
        return self._lib.grammard_client_pending_rows(self._h())

    def _result(self, codes: np.ndarray, flags: np.ndarray) -> StepResult:
        first = np.zeros(len(self._rows), np.int64)
        if len(self._rows) > 1:
            np.cumsum(self._rows[:-1], out=first[1:])
        return StepResult(self._ids, codes, flags, first, self._rows, self)

    def wait_masks(self, out: Any, rows: Optional[Sequence[int]] = None,
                   timeout: Optional[float] = None) -> StepResult:
        """Waits for the step in flight and writes its rows into `out` (int32
        rows of at least words_per_row words: a numpy array, a torch tensor
        or any writable buffer): step row r at out[rows[r]], or at out[r]."""
        buf = _buffers.mask_rows(out, self.words_per_row, "mask buffer")
        row_map = None
        if rows is not None:
            row_map = np.ascontiguousarray(rows, dtype=np.int64)
        return self._wait_into(buf, row_map, timeout)

    def _wait_into(self, buf, row_map, timeout):
        n = len(self._ids)
        codes = np.zeros(n, np.int32)
        flags = np.zeros(n, np.uint8)
        if row_map is not None and len(row_map) != self.pending_rows():
            raise InvalidArgument(
                f"wait_masks: {len(row_map)} destination rows for a step of "
                f"{self.pending_rows()} rows")
        self._check(self._lib.grammard_client_wait_masks_at(
            self._h(), buf.address, buf.row_stride, buf.rows,
            None if row_map is None else row_map.ctypes.data, _ms(timeout),
            codes.ctypes.data, flags.ctypes.data))
        return self._result(codes, flags)

    def _apply_arrays(self, indices):
        """The row indices (checked, or None) and the outcome arrays of a
        wait_apply call."""
        idx = _buffers.int32_array(indices, "indices", self.pending_rows())
        n = len(self._ids)
        return idx, np.zeros(n, np.int32), np.zeros(n, np.uint8)

    def wait_apply_cpu(self, logits: Any,
                       indices: Optional[Sequence[int]] = None,
                       timeout: Optional[float] = None) -> StepResult:
        """Waits, then masks host logits in place (float32, float16 or
        bfloat16 rows of at least vocab_size columns): mask row k applies
        to logits row indices[k], or row k."""
        lg = _buffers.logits_rows(logits, "logits", "cpu")
        idx, codes, flags = self._apply_arrays(indices)
        self._check(self._lib.grammard_client_wait_apply_cpu(
            self._h(), lg.address, _buffers.DTYPE_CODES[lg.kind], lg.rows,
            lg.columns, lg.row_stride,
            None if idx is None else idx.ctypes.data, _ms(timeout),
            codes.ctypes.data, flags.ctypes.data))
        return self._result(codes, flags)

    def wait_apply_cuda(self, logits: Any, stream: Any = None,
                        indices: Optional[Sequence[int]] = None,
                        timeout: Optional[float] = None) -> StepResult:
        """Waits, then masks device logits in place on `stream` (a torch
        CUDA stream, its handle as an int, or None: the default stream):
        `logits` a torch CUDA tensor or a DeviceLogits. Nothing waits for the
        GPU."""
        lg = _device_logits(logits)
        idx, codes, flags = self._apply_arrays(indices)
        self._check(self._lib.grammard_client_wait_apply_cuda(
            self._h(), lg.address, _buffers.DTYPE_CODES[lg.kind], lg.rows,
            lg.columns, lg.row_stride,
            None if idx is None else idx.ctypes.data, _stream(stream),
            _ms(timeout), codes.ctypes.data, flags.ctypes.data))
        return self._result(codes, flags)

    def jump_forward(self, index: int) -> Tuple[bytes, List[int]]:
        """What the grammar forces next for the sequence at `index` of the
        last waited step (opened with jump_forward=True): the bytes, and
        tokens of a tokenization of a prefix of them."""
        n_bytes = ctypes.c_size_t()
        n_tokens = ctypes.c_int64()
        self._check(self._lib.grammard_client_jump_forward(
            self._h(), index, None, 0, ctypes.byref(n_bytes), None, 0,
            ctypes.byref(n_tokens)))
        data = ctypes.create_string_buffer(max(1, n_bytes.value))
        tokens = (ctypes.c_int32 * max(1, n_tokens.value))()
        self._check(self._lib.grammard_client_jump_forward(
            self._h(), index, data, n_bytes.value, None, tokens,
            n_tokens.value, None))
        return data.raw[:n_bytes.value], list(tokens[:n_tokens.value])

    # ------------------------------------------------------------ rank sync

    def sync_readiness(self, group: str, round: int, rank: int,
                       world_size: int, ids: Iterable[int],
                       timeout: Optional[float] = None) -> Readiness:
        """This rank's readiness of `ids`, agreed with the other ranks of
        `group` in `round` (ready: on every rank; failed: on any)."""
        a = np.ascontiguousarray(list(ids), dtype=np.uint64)
        agreed = np.zeros(len(a), np.int32)
        self._check(self._lib.grammard_client_sync_readiness(
            self._h(), group.encode("utf-8"), round, rank, world_size,
            a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), len(a),
            _ms(timeout),
            agreed.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))))
        return Readiness(
            tuple(int(i) for i, s in zip(a, agreed) if s == State.READY),
            tuple(int(i) for i, s in zip(a, agreed) if s == State.FAILED))

    def metrics(self) -> dict:
        """The client's own counters: steps, step latency and wait time
        (histograms), reconnects, outages, replays."""
        m = _native.Metrics()
        self._check(self._lib.grammard_client_metrics_snapshot(
            self._h(), ctypes.byref(m)))

        def latency(h):
            return {"buckets": list(h.buckets), "count": h.count,
                    "sum_seconds": h.sum_seconds,
                    "max_seconds": h.max_seconds}

        return {"steps": m.steps, "step_latency": latency(m.step_latency),
                "wait_time": latency(m.wait_time),
                "reconnects": m.reconnects,
                "reconnect_attempts": m.reconnect_attempts,
                "outages_given_up": m.outages_given_up,
                "outage_seconds": m.outage_seconds,
                "replayed_sequences": m.replayed_sequences,
                "replayed_tokens": m.replayed_tokens}


def _constraint_bytes(constraint: Any, what: str) -> bytes:
    """A Constraint's wire form; bytes are taken as one already."""
    if isinstance(constraint, Constraint):
        return constraint.encode()
    if isinstance(constraint, (bytes, bytearray)):
        return bytes(constraint)
    raise InvalidArgument(
        f"{what}: the constraint must come from grammard.json_schema, regex, "
        f"ebnf, choice, structural_tag or json_object (or be a serialized "
        f"grammard.v1.Constraint), got {type(constraint).__name__}")


def _sequence_error(message: str):
    """A failed sequence's error, its code read off the message's start when
    the library put it there, else FAILED_PRECONDITION."""
    return error_for(9, message)


def _flatten(lists, n, what):
    """int64 offsets (n + 1) and the int32 concatenation of n lists."""
    offsets = np.zeros(n + 1, np.int64)
    if lists is None:
        return offsets, np.zeros(0, np.int32)
    if len(lists) != n:
        raise InvalidArgument(f"submit_step: {len(lists)} {what} lists for "
                              f"{n} sequences")
    lengths = [len(x) for x in lists]
    np.cumsum(lengths, out=offsets[1:])
    flat = np.zeros(int(offsets[-1]), np.int32)
    at = 0
    for x, k in zip(lists, lengths):
        flat[at:at + k] = x
        at += k
    return offsets, flat


def _stream(stream: Any) -> Optional[int]:
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is None:
        raise InvalidArgument(
            f"stream must be a torch CUDA stream or its handle, got "
            f"{type(stream).__name__}")
    return int(handle)


def _device_logits(logits: Any):
    if isinstance(logits, DeviceLogits):
        if logits.dtype not in _buffers.DTYPE_CODES:
            raise InvalidArgument(
                f"logits dtype must be float32, float16 or bfloat16, got "
                f"{logits.dtype!r}")
        return _buffers.Rows(logits.pointer, logits.rows, logits.vocab,
                             logits.row_stride or logits.vocab, logits.dtype,
                             "cuda")
    return _buffers.logits_rows(logits, "logits", "cuda")
