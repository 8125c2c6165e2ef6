"""Replays, call for call, what vLLM V1 does with a structured-output
backend, and a greedy "model" (cases.Model) in place of the GPU.

From vLLM's StructuredOutputManager and Scheduler (v0.10-v0.14, see
grammard.contracts): compile_grammar on a thread pool, the Future polled
with a 100 us timeout until done; per step grammar_bitmask: a bitmask of
max_num_seqs * (1 + spec) rows allocated once, each request taking 1 +
its scheduled drafts rows in order, filled either by the serial loop (fill,
accept the draft, fill, ..., then one rollback of everything advanced) or,
without drafts, from 8 threads in batches of 16; terminated requests get
all -1 rows. After the forward pass: the sampled tokens (drafts verified:
the longest matching prefix plus one) go to accept_tokens; new drafts are
trimmed with validate_tokens.

With `plugin=True` the driver calls what grammard's vLLM plugin adds:
prefetch (the drafts of every request before validation and before the
bitmask) and the plugin's batched bitmask where there are no drafts.
"""

import concurrent.futures
import random
import time
import types

import numpy as np

from grammard import vllm_plugin

import cases


class Request(cases.Request):
    def __init__(self, rid, kind, spec, seed):
        super().__init__(rid, seed)
        self.kind = kind
        self.spec = spec
        self.refused = False  # accept_tokens returned False


class VllmDriver(cases.Driver):
    def __init__(self, backend, model, *, max_num_seqs=16, num_spec=0,
                 plugin=False, parallel=False, reference=None,
                 draft_seed=0, max_tokens=48, mirror=None, refuse=None):
        super().__init__(model, refuse, max_tokens)
        self.backend = backend
        self.max_num_seqs = max_num_seqs
        self.num_spec = num_spec
        self.plugin = plugin
        self.parallel = parallel
        # rid -> the tokens an undisturbed run produced (the drafter's
        # guesses; some are spoiled on purpose so drafts get rejected)
        self.reference = reference or {}
        self.rng = random.Random(draft_seed)
        self.mirror = mirror  # a RowMirror checking every row, or None
        self.pool = concurrent.futures.ThreadPoolExecutor(4)
        self.fill_pool = concurrent.futures.ThreadPoolExecutor(8)
        self.bitmask = None

    # ---------------------------------------------------------- admission

    def add(self, rid, kind, spec, seed):
        r = Request(rid, kind, spec, seed)
        r.future = self.pool.submit(self.backend.compile_grammar, kind, spec)
        self.requests[rid] = r
        return r

    def _ready(self):
        ready = []
        for r in self.requests.values():
            if r.done:
                continue
            if r.grammar is None:
                try:
                    r.grammar = r.future.result(timeout=0.0001)
                except concurrent.futures.TimeoutError:
                    continue
                if self.mirror is not None:
                    self.mirror.open(r)
            ready.append(r)
        return ready

    # --------------------------------------------------------------- step

    def grammar_bitmask(self, batch):
        if self.bitmask is None:
            self.bitmask = self.backend.allocate_token_bitmask(
                self.max_num_seqs * (1 + self.num_spec))
        bitmask = self.bitmask
        if self.plugin and any(r.drafts for r in batch):
            self.backend.prefetch({r.grammar: r.drafts for r in batch})
        first = []
        at = 0
        for r in batch:
            first.append(at)
            at += 1 + len(r.drafts)
        if self.plugin and not any(r.drafts for r in batch):
            # The plugin's grammar_bitmask for a batch without drafts.
            manager = types.SimpleNamespace(_grammar_bitmask=bitmask,
                                            reasoner=None)
            requests = {r.rid: types.SimpleNamespace(
                structured_output_request=types.SimpleNamespace(
                    grammar=r.grammar)) for r in batch}
            rows = vllm_plugin._batched_bitmask(
                manager, self.backend, requests, [r.rid for r in batch],
                [r.grammar for r in batch])
            assert rows is not None
            return rows, first
        if not any(r.drafts for r in batch):
            live = [(r, i) for r, i in zip(batch, first)
                    if not r.grammar.is_terminated()]
            for r, i in zip(batch, first):
                if r.grammar.is_terminated():
                    bitmask[i].fill_(-1)
            if self.parallel:
                chunks = [live[k:k + 16] for k in range(0, len(live), 16)]
                futures = [self.fill_pool.submit(self._fill_chunk, bitmask, c)
                           for c in chunks]
                for f in futures:
                    f.result()
            else:
                for r, i in live:
                    r.grammar.fill_bitmask(bitmask, i)
        else:
            for r, i in zip(batch, first):
                advanced = 0
                for k, token in enumerate(r.drafts + [None]):
                    if r.grammar.is_terminated():
                        bitmask[i + k].fill_(-1)
                        continue
                    r.grammar.fill_bitmask(bitmask, i + k)
                    if token is not None:
                        assert r.grammar.accept_tokens(r.rid, [token])
                        advanced += 1
                if advanced:
                    r.grammar.rollback(advanced)
        return bitmask[:at].numpy(), first

    @staticmethod
    def _fill_chunk(bitmask, chunk):
        for r, i in chunk:
            r.grammar.fill_bitmask(bitmask, i)

    def step(self):
        """One engine step over every ready request; False when none is
        left."""
        batch = self._ready()
        if not batch:
            if all(r.done for r in self.requests.values()):
                return False
            time.sleep(0.001)
            return True
        self.steps += 1
        rows, first = self.grammar_bitmask(batch)
        if self.mirror is not None:
            self.mirror.check(batch, rows, first)
        for r, i in zip(batch, first):
            accepted = self.sample(
                r, [rows[i + k].view(np.uint32)
                    for k in range(1 + len(r.drafts))])
            if r.grammar.accept_tokens(r.rid, accepted):
                r.output.extend(accepted)
            else:
                r.refused = True
            if self.ends(r, accepted):
                self.finish(r)
        self.propose_drafts([r for r in batch if not r.done])
        return True

    def propose_drafts(self, batch):
        if not self.num_spec:
            return
        for r in batch:
            ref = self.reference.get(r.rid, [])
            p = len(r.output)
            guess = list(ref[p:p + self.num_spec])
            if guess and self.rng.random() < 0.3:
                guess[-1] = self.rng.randrange(self.model.vocab_size)
            r.drafts = guess
        if self.plugin:
            self.backend.prefetch({r.grammar: r.drafts for r in batch})
        for r in batch:
            if r.drafts:
                r.drafts = r.grammar.validate_tokens(r.drafts)

    def finish(self, r):
        r.done = True
        r.drafts = []
        if self.mirror is not None:
            self.mirror.close(r)
        r.grammar = None  # the manager drops it with the request


class RowMirror:
    """The same sequences stepped through a plain grammard.Client (the C++
    client): every row an adapter wrote must equal the client's row for the
    same tokens."""

    def __init__(self, client, words):
        self.client = client
        self.words = words
        self.sent = {}  # rid -> tokens the mirror sequence holds
        self.ids = {}
        self.next_id = 1
        self.compared = 0

    def open(self, r):
        constraint = r.grammar._seq.constraint
        self.ids[r.rid] = self.next_id
        self.next_id += 1
        self.client.open(self.ids[r.rid], constraint)
        self.client.wait_ready([self.ids[r.rid]])
        self.sent[r.rid] = []

    def close(self, r):
        self.client.close_sequence(self.ids.pop(r.rid))

    def check(self, batch, rows, first):
        live = [r for r in batch if not r.grammar.is_terminated()
                and not r.grammar.failed]
        if not live:
            return
        ids, accepted, rollback, drafts = [], [], [], []
        for r in live:
            held = self.sent[r.rid]
            common = 0
            while (common < len(held) and common < len(r.output)
                   and held[common] == r.output[common]):
                common += 1
            ids.append(self.ids[r.rid])
            rollback.append(len(held) - common)
            accepted.append(r.output[common:])
            drafts.append(r.drafts)
            self.sent[r.rid] = list(r.output)
        self.client.submit_step(ids, accepted, rollback, drafts)
        total = sum(1 + len(d) for d in drafts)
        buf = np.zeros((total, self.client.words_per_row), np.uint32)
        result = self.client.wait_masks(buf)
        assert not result.codes.any(), result.codes
        at = 0
        index = {id(r): i for r, i in zip(batch, first)}
        for r, d in zip(live, drafts):
            i = index[id(r)]
            # Past an EOS draft the manager writes all -1 (terminated).
            eos = [k for k, t in enumerate(d) if t in self.client.eos_token_ids]
            for k in range(1 + (eos[0] if eos else len(d))):
                mine = rows[i + k].view(np.uint32)[:self.words]
                np.testing.assert_array_equal(
                    mine, buf[at + k],
                    err_msg=f"{r.kind} row {k} after {len(r.output)} tokens")
                self.compared += 1
            at += 1 + len(d)
