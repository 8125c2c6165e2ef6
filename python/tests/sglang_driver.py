"""Replays, call for call, what SGLang's scheduler does with a grammar
backend, and a greedy "model" (cases.Model) in place of the GPU.

From SGLang's GrammarManager, SamplingBatchInfo and output processing (see
grammard.contracts): get_cached_or_future_value per request (a copy on a
cache hit, else a Future polled each step), set_cache with a copy once
ready, an invalid grammar aborting its request; per step the first
grammar allocates the batch's vocab mask, each live grammar fills its row,
move_vocab_mask, apply_vocab_mask on the logits; after sampling
accept_token per request (ValueError: the request is aborted) and
`finished` set. EAGLE-style draft chains walk each chain with accept_token
and fill_vocab_mask, then roll the whole chain back.

With `plugin=True` the driver fills through the SGLang plugin's patched
mask update.
"""

import time

import numpy as np
import torch

from grammard import bench, sglang_plugin

import cases


class BatchInfo(bench._BatchInfo):
    """SamplingBatchInfo, as far as the mask update goes, patched by the
    plugin."""


sglang_plugin.patch_batch_info(BatchInfo)


class Request(cases.Request):
    def __init__(self, rid, key, seed):
        super().__init__(rid, seed)
        self.key = key
        self.aborted = None  # why the scheduler aborted it


class SglangDriver(cases.Driver):
    def __init__(self, backend, model, *, plugin=False, num_spec=0,
                 reference=None, max_tokens=48, refuse=None):
        super().__init__(model, refuse, max_tokens)
        self.backend = backend
        self.plugin = plugin
        self.num_spec = num_spec
        self.reference = reference or {}

    def add(self, rid, key, seed):
        r = Request(rid, key, seed)
        value, hit = self.backend.get_cached_or_future_value(key)
        if hit:
            r.grammar = value
        else:
            r.future = value
        self.requests[rid] = r
        return r

    def _ready(self):
        ready = []
        for r in self.requests.values():
            if r.done:
                continue
            if r.grammar is None:
                if not r.future.done():
                    continue
                value = r.future.result()
                if not hasattr(value, "accept_token"):  # the invalid one
                    self.backend.set_cache(r.key, value)
                    r.aborted = getattr(value, "error_message", "invalid")
                    r.done = True
                    continue
                self.backend.set_cache(r.key, value.copy())
                r.grammar = value
            ready.append(r)
        return ready

    def step(self):
        batch = self._ready()
        if not batch:
            if all(r.done for r in self.requests.values()):
                return False
            time.sleep(0.001)
            return True
        self.steps += 1
        vocab = self.model.vocab_size
        if any(r.drafts for r in batch):
            rows = self._draft_rows(batch)
        else:
            first = batch[0].grammar
            if self.plugin:
                info = BatchInfo([r.grammar for r in batch], vocab)
                info.update_regex_vocab_mask()
                mask = info.vocab_mask
            else:
                mask = first.allocate_vocab_mask(vocab, len(batch), "cpu")
                for i, r in enumerate(batch):
                    if not r.grammar.finished and \
                            not r.grammar.is_terminated():
                        r.grammar.fill_vocab_mask(mask, i)
                mask = first.move_vocab_mask(mask, "cpu")
            logits = torch.stack([self.model.logits(r.seed, len(r.output))
                                  for r in batch])
            first.apply_vocab_mask(logits=logits, vocab_mask=mask)
            sampled = torch.argmax(logits, dim=1).tolist()
            # The kernel's mask and the bit-unpacking sampler agree.
            for i, r in enumerate(batch):
                row = mask[i].numpy().view(np.uint32)
                assert sampled[i] == cases.masked_argmax(
                    self.model.logits(r.seed, len(r.output)), row, vocab)
            rows = {id(r): [mask[i].numpy().view(np.uint32)]
                    for i, r in enumerate(batch)}
        for r in batch:
            self._advance(r, rows[id(r)])
        self._propose([r for r in batch if not r.done])
        return True

    def _draft_rows(self, batch):
        """EAGLE's chain walk: per request, fill the mask at each node of
        its draft chain (accepting the node's token to get there), then
        roll the chain back."""
        rows = {}
        for r in batch:
            g = r.grammar
            mask = g.allocate_vocab_mask(self.model.vocab_size,
                                         1 + len(r.drafts), "cpu")
            walked = 0
            for k, token in enumerate(r.drafts + [None]):
                if g.is_terminated():
                    break
                g.fill_vocab_mask(mask, k)
                if token is None:
                    break
                try:
                    g.accept_token(token)
                except ValueError:
                    break
                walked += 1
            if walked:
                g.rollback(walked)
            rows[id(r)] = [mask[k].numpy().view(np.uint32)
                           for k in range(1 + len(r.drafts))]
        return rows

    def _advance(self, r, rows):
        accepted = self.sample(r, rows)
        for t in accepted:
            try:
                r.grammar.accept_token(t)
            except ValueError as e:
                r.aborted = str(e)
                r.done = True
                r.grammar = None
                return
            r.output.append(t)
        done = self.ends(r, accepted)
        r.grammar.finished = done
        if done:
            r.done = True
            r.grammar = None

    def _propose(self, batch):
        if not self.num_spec:
            return
        for r in batch:
            ref = self.reference.get(r.rid, [])
            p = len(r.output)
            r.drafts = list(ref[p:p + self.num_spec])
            if len(r.drafts) == self.num_spec and p % 2:
                r.drafts[-1] = 13  # spoiled: a chain cut short
