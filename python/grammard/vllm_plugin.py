"""grammard as vLLM's structured-output backend, installed by vLLM's plugin
loader (entry point group ``vllm.general_plugins``, name ``grammard``).

vLLM chooses its backend from a closed list, so the plugin takes the place
of whichever backend is configured, in every vLLM process it loads into,
when $GRAMMARD_TARGET is set (nothing happens otherwise):

- ``StructuredOutputManager.grammar_init``: the engine-wide backend becomes
  a :class:`grammard.vllm.GrammardBackend` before vLLM would build its own
  (vLLM skips building one when ``self.backend`` is set).
- ``StructuredOutputManager.grammar_bitmask``: the scheduled draft tokens
  are announced first (``prefetch``), so the manager's speculative loop is
  served from one Decode step; without drafts the whole batch is filled
  with one ``fill_rows`` straight into the manager's bitmask (rows of
  terminated requests and requests still reasoning allow everything, as
  vLLM writes them). Anything unexpected falls back to vLLM's own code.
- ``Scheduler.update_draft_token_ids`` (where present): the new drafts of
  every request are announced before vLLM validates them one by one.
- the request validation of the frontend (``InputProcessor`` or, before
  v0.11, ``Processor``, ``_validate_structured_output``): the constraint is
  compiled by grammard (which warms its cache) and a constraint grammard
  cannot enforce is refused there, as a 400 with the daemon's message,
  instead of failing inside the engine core (where, should one still fail,
  the backend ends that request with EOS and logs why, rather than let the
  exception stop the engine).

Read from vLLM v0.10-v0.14 (see grammard.contracts). Calling register()
more than once is harmless.
"""

from __future__ import annotations

import logging
import os
import threading

from ._stepper import TERMINATED

log = logging.getLogger("grammard.vllm_plugin")

_lock = threading.Lock()
_frontend_client = None
# How long request validation waits for a compile (grammard's compiles take
# milliseconds; the daemon's own deadline bounds the rest).
VALIDATE_TIMEOUT = 10.0


def enabled() -> bool:
    return bool(os.environ.get("GRAMMARD_TARGET"))


def register() -> None:
    """The plugin's entry point."""
    if not enabled():
        return
    try:
        from vllm.v1 import structured_output
    except Exception as e:  # not a vLLM with the V1 engine
        log.warning("grammard: vLLM V1 not found, plugin inactive (%s)", e)
        return
    patch_manager(structured_output.StructuredOutputManager)
    try:
        from vllm.v1.core.sched import scheduler
        patch_scheduler(scheduler.Scheduler)
    except Exception:
        pass
    for module, cls in (("vllm.v1.engine.input_processor", "InputProcessor"),
                        ("vllm.v1.engine.processor", "Processor")):
        try:
            mod = __import__(module, fromlist=[cls])
        except Exception:
            continue
        if hasattr(mod, cls):
            patch_validation(getattr(mod, cls))


def patch_manager(manager_cls) -> None:
    if getattr(manager_cls, "_grammard", False):
        return
    original_init = manager_cls.grammar_init
    original_bitmask = manager_cls.grammar_bitmask
    from .vllm import GrammardBackend

    def grammar_init(self, request):
        if getattr(self, "backend", None) is None:
            config = self.vllm_config
            tokenizer = getattr(self, "tokenizer", None)
            self.backend = GrammardBackend(
                config, tokenizer,
                config.model_config.get_vocab_size(),
                on_compile_error="end")
        return original_init(self, request)

    def grammar_bitmask(self, requests, structured_output_request_ids,
                        scheduled_spec_decode_tokens):
        backend = getattr(self, "backend", None)
        if not isinstance(backend, GrammardBackend):
            return original_bitmask(self, requests,
                                    structured_output_request_ids,
                                    scheduled_spec_decode_tokens)
        ids = list(structured_output_request_ids)
        try:
            grammars = [requests[i].structured_output_request.grammar
                        for i in ids]
        except Exception:
            grammars = None
        if grammars and scheduled_spec_decode_tokens:
            backend.prefetch({g: scheduled_spec_decode_tokens.get(i, ())
                              for g, i in zip(grammars, ids)
                              if g is not None})
        if (grammars and not any(scheduled_spec_decode_tokens.get(i)
                                 for i in ids)):
            batched = _batched_bitmask(self, backend, requests, ids, grammars)
            if batched is not None:
                return batched
        return original_bitmask(self, requests, structured_output_request_ids,
                                scheduled_spec_decode_tokens)

    manager_cls.grammar_init = grammar_init
    manager_cls.grammar_bitmask = grammar_bitmask
    manager_cls._grammard = True


def _batched_bitmask(manager, backend, requests, ids, grammars):
    """The manager's bitmask for a batch without drafts, one row per
    request in `ids` order, filled by one fill_rows; None where this vLLM
    differs from what it expects (the caller then runs vLLM's own)."""
    try:
        bitmask = getattr(manager, "_grammar_bitmask", None)
        if bitmask is None:
            config = manager.vllm_config
            spec = getattr(config, "speculative_config", None)
            n_spec = getattr(spec, "num_speculative_tokens", 0) or 0
            bitmask = backend.allocate_token_bitmask(
                config.scheduler_config.max_num_seqs * (1 + n_spec))
            manager._grammar_bitmask = bitmask
        should_fill = getattr(manager, "should_fill_bitmask", None)
        if getattr(manager, "reasoner", True) is None:
            # No reasoning parser: every request fills (vLLM's own test).
            should_fill = None
        if should_fill is None and None not in grammars:
            out = backend.fill_batch(grammars, bitmask)
            if out is not None:
                return out
        fill, rows = [], []
        for row, (i, g) in enumerate(zip(ids, grammars)):
            # g._seq.status: is_terminated() without the call (the grammars
            # of a GrammardBackend are all GrammardGrammar).
            if (g is None or g._seq.status == TERMINATED
                    or (should_fill is not None
                        and not should_fill(requests[i]))):
                bitmask[row].fill_(-1)
            else:
                fill.append(g)
                rows.append(row)
        if fill:
            backend.fill_rows(fill, bitmask, rows)
        return bitmask[:len(ids)].numpy()
    except (AttributeError, KeyError, TypeError) as e:
        log.debug("grammard: batched bitmask unavailable (%s)", e)
        return None


def patch_scheduler(scheduler_cls) -> None:
    if getattr(scheduler_cls, "_grammard", False):
        return
    original = getattr(scheduler_cls, "update_draft_token_ids", None)
    if original is None:
        return

    def update_draft_token_ids(self, draft_token_ids, *args, **kwargs):
        from .vllm import GrammardBackend
        manager = getattr(self, "structured_output_manager", None)
        backend = getattr(manager, "backend", None)
        if isinstance(backend, GrammardBackend):
            try:
                announced = {}
                for rid, drafts in zip(draft_token_ids.req_ids,
                                       draft_token_ids.draft_token_ids):
                    request = self.requests.get(rid)
                    so = getattr(request, "structured_output_request", None)
                    grammar = getattr(so, "grammar", None) if so else None
                    if grammar is not None and drafts:
                        announced[grammar] = drafts
                backend.prefetch(announced)
            except Exception as e:  # the announcement only saves time
                log.debug("grammard: drafts not announced (%s)", e)
        return original(self, draft_token_ids, *args, **kwargs)

    scheduler_cls.update_draft_token_ids = update_draft_token_ids
    scheduler_cls._grammard = True


def patch_validation(processor_cls) -> None:
    if getattr(processor_cls, "_grammard", False):
        return
    if not hasattr(processor_cls, "_validate_structured_output"):
        return

    def _validate_structured_output(self, params, *args, **kwargs):
        so = getattr(params, "structured_outputs", None) or getattr(
            params, "guided_decoding", None)
        if so is None:
            return None
        validate(so)
        return None

    processor_cls._validate_structured_output = _validate_structured_output
    processor_cls._grammard = True


def validate(structured_outputs) -> None:
    """Compiles a request's constraint with grammard (ValueError, which
    vLLM answers with a 400, when it cannot be enforced)."""
    from .errors import InvalidArgument, ResourceExhausted
    from .vllm import (connect_from_env, constraint_for,
                       json_options_from_env, spec_of_params)
    global _frontend_client
    try:
        kind, spec = spec_of_params(structured_outputs)
        constraint = constraint_for(kind, spec, json_options_from_env())
        with _lock:
            if _frontend_client is None or _frontend_client.closed:
                _frontend_client = connect_from_env()
            client = _frontend_client
        client.compile(constraint, wait=True, timeout=VALIDATE_TIMEOUT)
    except (InvalidArgument, ResourceExhausted) as e:
        raise ValueError(f"grammard: {e.message}") from None
