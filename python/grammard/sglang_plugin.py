"""grammard as SGLang's grammar backend, installed by SGLang's plugin loader
(entry point group ``sglang.srt.plugins``, name ``grammard``), or by
calling register() in the scheduler process on SGLang builds without the
group.

register() adds the backend under the name ``grammard`` with SGLang's
``register_grammar_backend`` (and to ``--grammar-backend``'s choices where
``add_grammar_backend_choices`` exists), so ``--grammar-backend grammard``
selects it; and it patches ``SamplingBatchInfo.update_regex_vocab_mask`` so
that a batch whose grammars are all grammard's is filled by one Decode step
decoded straight into a mask tensor kept from step to step
(``batch_vocab_mask``) instead of a fresh mask and one ``fill_vocab_mask``
per request; other batches run SGLang's own code. Read from SGLang's
base_grammar_backend.py @ 99e1c516 and sampling_batch_info.py @ dd99fb90
(see grammard.contracts). Calling register() more than once is harmless.
"""

from __future__ import annotations

import logging

log = logging.getLogger("grammard.sglang_plugin")

NAME = "grammard"


def register() -> None:
    """The plugin's entry point."""
    try:
        from sglang.srt.constrained import base_grammar_backend as base
    except Exception as e:
        log.warning("grammard: SGLang not found, plugin inactive (%s)", e)
        return
    from .sglang import create_backend
    if NAME not in getattr(base, "GRAMMAR_BACKEND_REGISTRY", {}):
        base.register_grammar_backend(NAME, create_backend)
        try:
            from sglang.srt import server_args
            add = getattr(server_args, "add_grammar_backend_choices", None)
            if add is not None:
                add([NAME])
        except Exception as e:
            log.debug("grammard: --grammar-backend choices unchanged (%s)",
                      e)
    try:
        from sglang.srt.sampling import sampling_batch_info
        patch_batch_info(sampling_batch_info.SamplingBatchInfo)
    except Exception as e:
        log.debug("grammard: per-request fills kept (%s)", e)


def patch_batch_info(batch_info_cls) -> None:
    if getattr(batch_info_cls, "_grammard", False):
        return
    original = batch_info_cls.update_regex_vocab_mask
    from .sglang import GrammardGrammar

    def update_regex_vocab_mask(self):
        grammars = getattr(self, "grammars", None)
        first = grammars[0] if grammars else None
        if isinstance(first, GrammardGrammar):
            mask = first._backend.batch_vocab_mask_all(grammars,
                                                       self.vocab_size)
            if mask is not None:
                self.vocab_mask = first.move_vocab_mask(mask, self.device)
                self.apply_mask_func = first.apply_vocab_mask
                return None
        present = [g for g in grammars or () if g is not None]
        if not present or not all(isinstance(g, GrammardGrammar)
                                  for g in present):
            return original(self)
        first = present[0]
        fill, rows = [], []
        for i, g in enumerate(grammars):
            if g is not None and not g.finished and not g.is_terminated():
                fill.append(g)
                rows.append(i)
        mask = first._backend.batch_vocab_mask(fill, rows, len(grammars),
                                               self.vocab_size)
        self.vocab_mask = first.move_vocab_mask(mask, self.device)
        self.apply_mask_func = first.apply_vocab_mask
        return None

    batch_info_cls.update_regex_vocab_mask = update_regex_vocab_mask
    batch_info_cls._grammard = True
