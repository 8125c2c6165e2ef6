"""SGLang's grammar backend, served by grammard.

:class:`GrammardGrammarBackend` implements ``BaseGrammarBackend``
(``dispatch_json`` / ``dispatch_regex`` / ``dispatch_ebnf`` /
``dispatch_structural_tag``, the cache of compiled grammars and the futures
the scheduler polls) and :class:`GrammardGrammar` ``BaseGrammarObject``
(``accept_token``, ``rollback``, ``is_terminated``, ``allocate_vocab_mask``,
``fill_vocab_mask``, ``move_vocab_mask``, ``apply_vocab_mask``, ``copy``,
``finished`` and jump-forward), as read from SGLang's
``python/sglang/srt/constrained/base_grammar_backend.py`` (``contracts.
SGLANG`` lists them with the commit they were read from). With SGLang
installed the classes derive from its bases; without it they stand alone.

One scheduler step is one Decode step (see ``_stepper``): ``accept_token``
records, the first ``fill_vocab_mask`` of a step sends every changed
sequence, later fills copy the rows received; ``fill_rows`` (the plugin's
batch path) decodes the whole batch straight into the mask. Masks are
XGrammar's layout (int32 words, bit t allows token t), applied by
grammard's kernels: ``apply_vocab_mask`` masks CUDA logits on the current
stream, CPU logits on the CPU.

A constraint that cannot be enforced compiles to the invalid-grammar
sentinel the scheduler aborts on (its message logged); a token grammard
refuses raises ValueError from ``accept_token``, as XGrammar's backend
does, and the sequence's rows allow only EOS from then on.

Thread-safety: dispatches run on the backend's executor; everything else
is called by the scheduler thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import operator
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import masks
from ._stepper import FAILED, TERMINATED, Stepper, copy_row
from .client import Client
from .constraints import JsonOptions, ebnf, json_object, json_schema, regex
from .constraints import structural_tag
from .errors import Error, InvalidArgument
from .vllm import connect_from_env

log = logging.getLogger("grammard.sglang")

_FINISHED = operator.attrgetter("finished")

try:  # the engine's bases, when SGLang is installed
    from sglang.srt.constrained import base_grammar_backend as _sgl
    _BackendBase = _sgl.BaseGrammarBackend
    _GrammarBase = _sgl.BaseGrammarObject
except Exception:
    _sgl = None
    _BackendBase = object
    _GrammarBase = object

# As in grammard.vllm: what a class with slots adds where the base is object.
_OPEN_SLOTS = ("__dict__", "__weakref__") if _GrammarBase is object else ()

ANY_JSON = "$$ANY$$"  # SGLang's key for "any JSON object"


class _Invalid:
    """Stand-in for SGLang's invalid-grammar sentinel without SGLang."""

    def __init__(self, message: str):
        self.error_message = message


def invalid_grammar(message: str):
    """The scheduler's "this grammar failed" value: SGLang's
    InvalidGrammarObject(message) where it has one, else its
    INVALID_GRAMMAR_OBJ sentinel, else a stand-in."""
    if _sgl is not None:
        cls = getattr(_sgl, "InvalidGrammarObject", None)
        if cls is not None:
            return cls(message)
        sentinel = getattr(_sgl, "INVALID_GRAMMAR_OBJ", None)
        if sentinel is not None:
            return sentinel
    return _Invalid(message)


class GrammardGrammar(_GrammarBase):
    """BaseGrammarObject: one request's sequence on the backend's stream."""

    # Slots: the scheduler touches every grammar of the batch each step
    # (accept_token, finished), mostly no longer in cache. `finished` is a
    # plain attribute where SGLang's base has a property: set and read per
    # request per step.
    __slots__ = ("_backend", "_stepper", "_constraint", "_seq", "finished",
                 "grammar_stats", "current_token") + _OPEN_SLOTS

    def __init__(self, backend: "GrammardGrammarBackend", constraint: bytes):
        self._backend = backend
        self._stepper = backend.stepper
        self._constraint = constraint
        self._seq = self._stepper.new_sequence(
            constraint, jump_forward=backend.jump_forward)
        self.finished = False
        self.grammar_stats = None
        self.current_token = None

    # -------------------------------------------------------------- tokens

    def accept_token(self, token: int) -> None:
        if not self._stepper.accept(self._seq, (int(token),), fail=False):
            err = self._seq.error
            raise ValueError(
                f"grammard refused token {int(token)}"
                + (f": {err.message}" if err is not None else ""))
        self.current_token = token

    def rollback(self, k: int) -> None:
        self._stepper.rollback(self._seq, k)

    def is_terminated(self) -> bool:
        return self._seq.status == TERMINATED

    # --------------------------------------------------------------- masks

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int,
                            device: Any):
        import torch
        if vocab_size < self._stepper.vocab_size:
            raise InvalidArgument(
                f"vocab_size {vocab_size} is smaller than the tokenizer's "
                f"{self._stepper.vocab_size}")
        return torch.full((batch_size, (vocab_size + 31) // 32), -1,
                          dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        view = _mask_view(vocab_mask, self._stepper.words)
        if not 0 <= idx < view.shape[0]:
            raise InvalidArgument(
                f"idx {idx} outside a vocab mask of {view.shape[0]} rows")
        row = self._stepper.row(self._seq)
        copy_row(row, view.ctypes.data + idx * view.strides[0],
                 self._stepper.words)
        if view.shape[1] > self._stepper.words:
            view[idx, self._stepper.words:] = 0

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any):
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        if getattr(logits, "device", None) is not None and \
                logits.device.type == "cuda":
            import torch
            stream = torch.cuda.current_stream(logits.device).cuda_stream
            masks.apply_mask_cuda(logits, vocab_mask, stream=stream)
        else:
            masks.apply_mask_cpu(logits, vocab_mask)

    # ---------------------------------------------------------- lifecycle

    def copy(self) -> "GrammardGrammar":
        """A fresh sequence of the same grammar (SGLang caches one object
        per key and hands each request a copy)."""
        return GrammardGrammar(self._backend, self._constraint)

    def __del__(self):
        stepper = getattr(self, "_stepper", None)
        if stepper is not None:
            stepper.release(self._seq)

    # -------------------------------------------------------- jump-forward

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int],
                                                                 str]]:
        """What the grammar forces next, as of the last step: (tokens,
        text), or None (nothing forced, or the backend was made without
        jump_forward)."""
        if not self._seq.jump_forward:
            return None
        text, tokens = self._seq.jump
        if not text:
            return None
        return list(tokens), text.decode("utf-8", "replace")

    def jump_forward_str_state(self, helper: Tuple[List[int], str]
                               ) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int],
                            new_output_ids: List[int],
                            next_state: int) -> None:
        """The output was retokenized after a jump: roll back to where the
        two tokenizations part and accept the new tail."""
        k = 0
        for a, b in zip(old_output_ids, new_output_ids):
            if a != b:
                break
            k += 1
        self._stepper.rollback(self._seq, len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)

    @property
    def failed(self) -> bool:
        return self._seq.status == FAILED


def _mask_view(mask: Any, words: int) -> np.ndarray:
    """A CPU int32 mask as a numpy uint32 array (no copy), checked."""
    from . import _buffers
    _buffers.mask_rows(mask, words, "vocab_mask")  # raises when unfit
    if hasattr(mask, "numpy"):
        return mask.numpy().view(np.uint32)
    return np.asarray(mask).view(np.uint32)


class GrammardGrammarBackend(_BackendBase):
    """BaseGrammarBackend over one grammard Decode stream: dispatches
    compile through the daemon (with a unary call, so a step in flight is
    never held), keeps SGLang's cache of compiled grammars and the futures
    its scheduler polls."""

    def __init__(self, tokenizer: Any = None, vocab_size: Optional[int] = None,
                 *, client: Optional[Client] = None,
                 json_options: Optional[JsonOptions] = None,
                 jump_forward: bool = False, compile_timeout: float = 60.0,
                 max_workers: Optional[int] = None):
        # SGLang's base keeps its own executor and cache; these are ours
        # (same names), so the behaviour does not depend on its version.
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers)
        self.cache: Dict[Tuple[str, str], Any] = {}
        self._cache_lock = threading.Lock()
        self.tokenizer = tokenizer
        self.client = client if client is not None else connect_from_env()
        self.vocab_size = (self.client.vocab_size if vocab_size is None
                           else int(vocab_size))
        self.json_options = json_options or JsonOptions()
        self.jump_forward = jump_forward
        self.compile_timeout = compile_timeout
        self.stepper = Stepper(self.client)
        # (tensor, its uint32 view, rows filled, its heads by batch size)
        self._batch_mask = None

    # -------------------------------------------------------- dispatching

    def _compile(self, constraint) -> Any:
        data = constraint.encode()
        try:
            self.client.compile(data, wait=True, timeout=self.compile_timeout)
        except Error as e:
            log.warning("grammard: constraint refused: %s", e)
            return invalid_grammar(str(e))
        return GrammardGrammar(self, data)

    def dispatch_json(self, key_string: str):
        if key_string == ANY_JSON:
            return self._compile(json_object(options=self.json_options))
        return self._compile(json_schema(key_string,
                                         options=self.json_options))

    def dispatch_regex(self, key_string: str):
        return self._compile(regex(key_string))

    def dispatch_ebnf(self, key_string: str):
        return self._compile(ebnf(key_string))

    def dispatch_structural_tag(self, key_string: str):
        return self._compile(structural_tag(key_string,
                                            options=self.json_options))

    def dispatch_fallback(self, key_type: str, key_string: str):
        raise ValueError(f"grammard: unsupported grammar kind {key_type!r}")

    def _init_value_dispatch(self, key: Tuple[str, str], *args: Any):
        key_type, key_string = key
        try:
            dispatch = {"json": self.dispatch_json,
                        "regex": self.dispatch_regex,
                        "ebnf": self.dispatch_ebnf,
                        "structural_tag": self.dispatch_structural_tag
                        }.get(key_type)
            if dispatch is None:
                return self.dispatch_fallback(key_type, key_string)
            return dispatch(key_string)
        except (Error, ValueError) as e:
            log.warning("grammard: %s grammar refused: %s", key_type, e)
            return invalid_grammar(str(e))

    def get_cached_or_future_value(self, key: Tuple[str, str],
                                   *args: Any, **kwargs: Any):
        """(a copy of the cached grammar, True), or (a Future of it,
        False)."""
        with self._cache_lock:
            cached = self.cache.get(key)
        if cached is not None:
            return (cached.copy() if isinstance(cached, GrammardGrammar)
                    else cached), True
        return self.executor.submit(self._init_value_dispatch, key), False

    def set_cache(self, key: Tuple[str, str], value: Any) -> None:
        with self._cache_lock:
            self.cache[key] = value

    def reset(self) -> None:
        with self._cache_lock:
            self.cache.clear()

    # -------------------------------------------------- beyond the contract

    def fill_rows(self, grammars: Sequence[GrammardGrammar], vocab_mask: Any,
                  rows: Sequence[int]) -> None:
        """fill_vocab_mask for a batch at once (rows distinct): one Decode
        step decoded straight into the mask's rows."""
        self.stepper.fill_rows([g._seq for g in grammars],
                               _mask_view(vocab_mask, self.stepper.words),
                               rows)

    def batch_vocab_mask(self, grammars: Sequence[GrammardGrammar],
                         rows: Optional[Sequence[int]], batch_size: int,
                         vocab_size: int, seqs: Optional[List[Any]] = None):
        """The batch's vocab mask (what allocate_vocab_mask and a
        fill_vocab_mask per grammar make), rows[i] (None: i) holding
        grammars[i]'s row and every other row allowing everything, in one
        tensor kept from step to step (SGLang moves it to the device, or
        applies it, before the next step), so that a step writes only its
        rows. seqs: the grammars' sequences, where the caller has them."""
        words = (vocab_size + 31) // 32
        if words < self.stepper.words:
            raise InvalidArgument(
                f"vocab_size {vocab_size} is smaller than the tokenizer's "
                f"{self.stepper.vocab_size}")
        held = self._batch_mask
        if held is None or held[1].shape[0] < batch_size or \
                held[1].shape[1] != words:
            import torch
            tensor = torch.full((max(batch_size, 8), words), -1,
                                dtype=torch.int32)
            held = (tensor, tensor.numpy().view(np.uint32), (), {})
        tensor, view, filled_before, heads = held
        if seqs is None:
            seqs = [g._seq for g in grammars]
        self.stepper.fill_rows(seqs, view, rows)
        if rows is None:
            rows = range(len(seqs))
        if filled_before and not (type(rows) is range
                                  and type(filled_before) is range
                                  and len(filled_before) <= len(rows)):
            stale = set(filled_before)
            stale.difference_update(rows)
            for r in stale:
                view[r] = 0xFFFFFFFF
        self._batch_mask = (tensor, view, rows, heads)
        head = heads.get(batch_size)
        if head is None:
            head = heads[batch_size] = tensor[:batch_size]
        return head

    def batch_vocab_mask_all(self, grammars: Sequence[Any],
                             vocab_size: int):
        """batch_vocab_mask for a batch whose grammars are all this
        backend's, live and not finished, row i holding grammars[i]'s row;
        None, writing nothing, for any other batch. Made for the scheduler's
        step: per request only C-level list operations."""
        seqs = self.stepper.live_batch(grammars, self._owns)
        if seqs is None or any(map(_FINISHED, grammars)):
            return None
        n = len(grammars)
        return self.batch_vocab_mask(grammars, None, n, vocab_size, seqs)

    def _owns(self, grammars: Sequence[Any]) -> bool:
        return all(type(g) is GrammardGrammar and g._backend is self
                   for g in grammars)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False)
        self.stepper.shutdown()


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int,
                   eos_token_ids: Any = None) -> GrammardGrammarBackend:
    """The factory SGLang's register_grammar_backend takes: the daemon and
    tokenizer from $GRAMMARD_TARGET / $GRAMMARD_TOKENIZER, the JSON
    whitespace from --constrained-json-disable-any-whitespace (or
    $GRAMMARD_JSON_WHITESPACE), jump-forward from $GRAMMARD_JUMP_FORWARD."""
    import os
    whitespace = os.environ.get("GRAMMARD_JSON_WHITESPACE") or (
        "compact" if getattr(server_args,
                             "constrained_json_disable_any_whitespace", False)
        else "any")
    options = JsonOptions(whitespace=whitespace,
                          lenient=os.environ.get("GRAMMARD_LENIENT") == "1")
    return GrammardGrammarBackend(
        tokenizer, vocab_size, json_options=options,
        jump_forward=os.environ.get("GRAMMARD_JUMP_FORWARD") == "1")
