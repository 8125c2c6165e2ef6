"""vLLM V1's structured-output backend, served by grammard.

:class:`GrammardBackend` implements ``StructuredOutputBackend``
(``compile_grammar``, ``allocate_token_bitmask``, ``destroy``) and
:class:`GrammardGrammar` ``StructuredOutputGrammar`` (``accept_tokens``,
``validate_tokens``, ``rollback``, ``fill_bitmask``, ``is_terminated``,
``reset``), as read from vLLM's ``vllm/v1/structured_output/
backend_types.py`` (``contracts.VLLM`` lists the signatures and the versions
they were read from). When vLLM is installed the classes derive from its
abstract bases; without it they stand alone with the same methods, so
tests replay the manager's calls with no vLLM.

One engine step is one Decode step (see ``_stepper``): accepts and
rollbacks are recorded, the first ``fill_bitmask`` of a step sends every
changed sequence at once, and later fills copy the rows received. Beyond
the contract, ``prefetch`` announces a step's draft tokens (so the
speculative fill / accept / rollback loop is served from one step's draft
rows) and ``fill_rows`` decodes a whole batch straight into the bitmask;
the vLLM plugin (``vllm_plugin``) calls both from the manager.

``compile_grammar`` runs on vLLM's compile pool: it compiles with a unary
call of its own (the daemon's cache is warm for the sequence's open), never
touching the Decode stream, and raises the daemon's error (InvalidArgument
naming the keyword) for a constraint that cannot be enforced. A token
grammard refused ends its request cleanly: ``accept_tokens`` returns False
and the request's rows allow only EOS from then on (vLLM cannot abort a
request from inside a fill).

A failed compile raises (the contract's behaviour; request validation is
expected to have refused the constraint first); with
``on_compile_error="end"`` (what the plugin uses) the request gets a
grammar that ends it with EOS at once and the error is logged, so that no
request can stop the engine.

Thread-safety: as the manager uses it: compiles on a pool, fills from
several threads at once, everything else from the engine core's thread
(see ``_stepper``).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _buffers
from ._stepper import FAILED, TERMINATED, Stepper, copy_row
from .client import Client
from .constraints import (Constraint, JsonOptions, choice, ebnf, json_object,
                          json_schema, regex, structural_tag)
from .errors import Error, InvalidArgument

log = logging.getLogger("grammard.vllm")

try:  # the engine's abstract bases, when vLLM is installed
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _BackendBase,
        StructuredOutputGrammar as _GrammarBase)
except Exception:  # no vLLM (or another layout): stand-alone classes
    _BackendBase = object
    _GrammarBase = object

# What a class with slots adds so that its instances still take any
# attribute and weak references, as the engine's (a base of its own already
# gives them both).
_OPEN_SLOTS = ("__dict__", "__weakref__") if _GrammarBase is object else ()

DEFAULT_TARGET = "127.0.0.1:50051"

# vLLM's StructuredOutputOptions names, in the enum's order.
REQUEST_TYPES = ("JSON", "JSON_OBJECT", "REGEX", "GRAMMAR", "CHOICE",
                 "STRUCTURAL_TAG")


def constraint_for(request_type: Any, grammar_spec: str,
                   options: JsonOptions) -> Constraint:
    """The grammard constraint of one of vLLM's structured-output keys:
    request_type a StructuredOutputOptions member (or its name),
    grammar_spec the key's text (a JSON list for CHOICE)."""
    name = getattr(request_type, "name", request_type)
    if name == "JSON":
        return json_schema(grammar_spec, options=options)
    if name == "JSON_OBJECT":
        return json_object(options=options)
    if name == "REGEX":
        return regex(grammar_spec)
    if name == "GRAMMAR":
        if "::=" not in grammar_spec:
            raise InvalidArgument(
                "grammar: grammard takes GBNF/EBNF rules (name ::= ...); "
                "Lark grammars are not supported")
        return ebnf(grammar_spec)
    if name == "CHOICE":
        return choice(grammar_spec)
    if name == "STRUCTURAL_TAG":
        return structural_tag(grammar_spec, options=options)
    raise InvalidArgument(
        f"unknown structured output type {name!r}; vLLM's are "
        f"{', '.join(REQUEST_TYPES)}")


def spec_of_params(params: Any):
    """(type name, spec text) of vLLM's StructuredOutputsParams, as the
    engine keys it: a dict schema as JSON text, choices as a JSON list,
    json_object as ""."""
    if getattr(params, "json", None) is not None:
        j = params.json
        return "JSON", j if isinstance(j, str) else json.dumps(j)
    if getattr(params, "json_object", None):
        return "JSON_OBJECT", ""
    if getattr(params, "regex", None) is not None:
        return "REGEX", params.regex
    if getattr(params, "choice", None) is not None:
        return "CHOICE", json.dumps(list(params.choice))
    if getattr(params, "grammar", None) is not None:
        return "GRAMMAR", params.grammar
    if getattr(params, "structural_tag", None) is not None:
        return "STRUCTURAL_TAG", params.structural_tag
    raise InvalidArgument("structured output parameters name no constraint")


def json_options_from_env(vllm_config: Any = None) -> JsonOptions:
    """JSON layout: $GRAMMARD_JSON_WHITESPACE (any, compact, indented),
    else vLLM's disable_any_whitespace (compact) or any;
    $GRAMMARD_LENIENT=1 drops keywords grammard cannot enforce exactly
    instead of refusing the request."""
    whitespace = os.environ.get("GRAMMARD_JSON_WHITESPACE")
    if not whitespace:
        config = getattr(vllm_config, "structured_outputs_config", None)
        if config is None:
            config = getattr(vllm_config, "decoding_config", None)
        compact = bool(getattr(config, "disable_any_whitespace", False))
        whitespace = "compact" if compact else "any"
    return JsonOptions(whitespace=whitespace,
                       lenient=os.environ.get("GRAMMARD_LENIENT") == "1")


def connect_from_env(tokenizer_name: Optional[str] = None,
                     target: Optional[str] = None) -> Client:
    """A Client to $GRAMMARD_TARGET (default 127.0.0.1:50051) for
    $GRAMMARD_TOKENIZER (the daemon's name of the model's tokenizer)."""
    target = target or os.environ.get("GRAMMARD_TARGET") or DEFAULT_TARGET
    name = tokenizer_name or os.environ.get("GRAMMARD_TOKENIZER")
    if not name:
        raise InvalidArgument(
            "set GRAMMARD_TOKENIZER to the name grammard serves the model's "
            "tokenizer under (a sub-folder of its --tokenizer_dir)")
    return Client(target, name)


class GrammardBackend(_BackendBase):
    """StructuredOutputBackend over one grammard Decode stream.

    vllm_config, tokenizer and vocab_size are vLLM's (vocab_size is the
    model's, which may exceed the tokenizer's: the extra columns stay
    masked). The daemon and tokenizer come from `client`, or from
    $GRAMMARD_TARGET / $GRAMMARD_TOKENIZER (connect_from_env)."""

    def __init__(self, vllm_config: Any = None, tokenizer: Any = None,
                 vocab_size: Optional[int] = None, *,
                 client: Optional[Client] = None,
                 json_options: Optional[JsonOptions] = None,
                 compile_timeout: float = 60.0,
                 on_compile_error: str = "raise"):
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.client = client if client is not None else connect_from_env()
        self.vocab_size = (self.client.vocab_size if vocab_size is None
                           else int(vocab_size))
        if self.vocab_size < self.client.vocab_size:
            raise InvalidArgument(
                f"the model's vocabulary ({self.vocab_size}) is smaller than "
                f"tokenizer {self.client.tokenizer!r}'s "
                f"({self.client.vocab_size})")
        self.json_options = json_options or json_options_from_env(vllm_config)
        self.compile_timeout = compile_timeout
        if on_compile_error not in ("raise", "end"):
            raise InvalidArgument(
                f"on_compile_error is 'raise' or 'end', not "
                f"{on_compile_error!r}")
        self.on_compile_error = on_compile_error
        self.stepper = Stepper(self.client)
        self.words = (self.vocab_size + 31) // 32  # the bitmask's width
        # (tensor, address, row stride in bytes, rows, uint32 view, the
        # manager's results by batch size) of the manager's bitmask.
        self._target = None

    # ------------------------------------------------------- the contract

    def compile_grammar(self, request_type: Any,
                        grammar_spec: str) -> "GrammardGrammar":
        try:
            constraint = constraint_for(request_type, grammar_spec,
                                        self.json_options).encode()
            self.client.compile(constraint, wait=True,
                                timeout=self.compile_timeout)
        except Error as e:
            if self.on_compile_error == "raise":
                raise
            log.error("grammard: %s constraint refused, request ends: %s",
                      getattr(request_type, "name", request_type), e)
            return GrammardGrammar(self, self.stepper.failed_sequence(e))
        return GrammardGrammar(self, self.stepper.new_sequence(constraint))

    def allocate_token_bitmask(self, max_num_seqs: int):
        import torch
        return torch.full((max_num_seqs, self.words), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self.stepper.shutdown()

    # -------------------------------------------------- beyond the contract

    def prefetch(self, drafts: Dict["GrammardGrammar", Sequence[int]]) -> None:
        """Announces the draft tokens each grammar's next fills will walk
        (the scheduled speculative tokens), so that one Decode step returns
        every row the manager's serial loop asks for."""
        self.stepper.announce({g._seq: d for g, d in drafts.items() if d})

    def fill_rows(self, grammars: Sequence["GrammardGrammar"], bitmask: Any,
                  rows: Sequence[int]) -> None:
        """fill_bitmask for a whole batch at once (rows distinct): one Decode
        step decoded straight into the bitmask's rows."""
        self.stepper.fill_rows([g._seq for g in grammars],
                               self._target_of(bitmask)[4], rows)

    def fill_batch(self, grammars: Sequence["GrammardGrammar"],
                   bitmask: Any) -> Optional[np.ndarray]:
        """fill_rows into rows 0..n-1 for a batch of live grammars, returning
        the manager's result (the bitmask's first n rows as numpy); None,
        writing nothing, when one of them has ended (the caller then fills
        row by row). Made for the engine's step: per request only C-level
        list operations."""
        seqs = self.stepper.live_batch(grammars)
        if seqs is None:
            return None
        target = self._target_of(bitmask)
        n = len(seqs)
        self.stepper.fill_rows(seqs, target[4], None)
        results = target[5]
        result = results.get(n)
        if result is None:
            result = results[n] = bitmask[:n].numpy()
        return result

    def _target_of(self, bitmask: Any):
        """(bitmask, address, row stride in bytes, rows, uint32 view, {}) of a
        CPU int32 bitmask with rows at least `words` wide, checked once per
        bitmask (the manager keeps one)."""
        t = self._target
        if t is not None and t[0] is bitmask:
            return t
        r = _buffers.mask_rows(bitmask, self.words, "bitmask")
        if r.rows < 1:
            raise InvalidArgument("bitmask has no rows")
        array = bitmask.numpy() if hasattr(bitmask, "numpy") else \
            np.asarray(bitmask)
        view = array.view(np.uint32)
        if view.ndim == 1:
            view = view.reshape(1, -1)
        self._target = (bitmask, r.address, r.row_stride * 4, r.rows, view,
                        {})
        return self._target

    def _fill_one(self, seq, bitmask: Any, batch_index: int) -> None:
        _, address, stride, rows, _, _ = self._target_of(bitmask)
        if not 0 <= batch_index < rows:
            raise InvalidArgument(
                f"batch_index {batch_index} outside a bitmask of {rows} rows")
        row = self.stepper.row(seq)
        dst = address + batch_index * stride
        copy_row(row, dst, self.stepper.words)
        extra = self.words - self.stepper.words
        if extra:
            import ctypes
            ctypes.memset(dst + self.stepper.words * 4, 0, extra * 4)


class GrammardGrammar(_GrammarBase):
    """StructuredOutputGrammar: one request's sequence on the stream."""

    # Slots: accept_tokens runs once per request per engine step, mostly on
    # objects no longer in cache; it reads this object and its sequence.
    __slots__ = ("_backend", "_stepper", "_seq") + _OPEN_SLOTS

    def __init__(self, backend: GrammardBackend, seq):
        self._backend = backend
        self._stepper = backend.stepper
        self._seq = seq

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        return self._stepper.accept(self._seq, tokens)

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        return list(tokens[:self._stepper.validate(self._seq, tokens)])

    def rollback(self, num_tokens: int) -> None:
        self._stepper.rollback(self._seq, num_tokens)

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        self._backend._fill_one(self._seq, bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self._seq.status == TERMINATED

    def reset(self):
        self._stepper.rollback(self._seq, self._seq.n)

    @property
    def failed(self) -> bool:
        """grammard refused one of its tokens (rows allow only EOS)."""
        return self._seq.status == FAILED

    @property
    def error(self):
        return self._seq.error

    def __del__(self):
        stepper = getattr(self, "_stepper", None)
        if stepper is not None:
            stepper.release(self._seq)
