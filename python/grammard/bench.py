"""Time per engine step through the vLLM adapter, the SGLang adapter and the
C++ client alone, on the same token trajectories against one daemon.

    taskset -c 1 bazel-bin/service/grammard --listen=127.0.0.1:50051 ... &
    python3 -m grammard.bench --target=127.0.0.1:50051 --cpus=0 \
        --cpp-bench=bazel-bin/client/client_step_bench \
        --schema=../shared/bench/order_schema.json

As deployed, the sidecar runs on cores of its own: --cpus pins the
benchmark (and the cpp process) to the cores given, the daemon goes on the
others (taskset). Unpinned on a small machine, the daemon's threads and the
engine's share cores and every figure moves by tens of microseconds.

Trajectories: per sequence, a walk of uniformly random allowed tokens under
the schema (seeded, compact JSON, EOS left out), made once with a Client.
Every path then replays them: at step s sequence i accepts its token
s mod len - 1 and asks for its next row; at s mod len = 0 it starts over as
a new request (whose grammar the adapters compile before the step, as the
engines do on their compile pools or at admission; its open goes with the
step). A step is timed from the first accept to the last row in the
engine's mask. Paths:

- cpp: client_step_bench, a C++ process of its own (SubmitStep +
  WaitMasks), run just before the others;
- capi: the same C++ client through the C ABI from this process (two
  ctypes calls a step, arrays made before the clock; requests starting
  over closed and opened inside it, as in cpp);
- vllm, vllm_rows, sglang, sglang_rows: the adapters as the engines call
  them (the classes below say which calls), with and without the plugins'
  batched paths;
- vllm_engine, sglang_engine: the engine's own side of those calls, the
  per-request accept loop over grammars that do nothing and, for vLLM, the
  lookup of each request's grammar before the bitmask (what the engine
  spends with any backend, grammard or XGrammar).

The in-process paths take turns step by step against the daemon, so they
share its state and the machine's load. Per adapter, what it adds is the
median over steps of its step less the C++ client's at the same step
(capi) less the engine's own accept calls at that step (``vllm_engine`` or
``sglang_engine``, where run; the rows paths' own per-request fill loops
stay in theirs). Each run prints a RESULT line of p50s and adds;
MEDIAN lines give their medians over runs (adds also as a share of capi's
p50).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from typing import Dict, List

import numpy as np

from . import constraints
from .client import Client

PATHS = ("cpp", "capi", "vllm", "sglang", "vllm_engine", "sglang_engine",
         "vllm_rows", "sglang_rows")
# The rows paths (the engines' per-request fills, without the plugins) take
# several times longer and crowd the caches the others share: asked for by
# name only.
DEFAULT_PATHS = PATHS[:6]


def trajectories(client: Client, constraint: bytes, count: int, length: int,
                 seed: int) -> List[List[int]]:
    """`count` walks of up to `length` uniformly random allowed tokens (EOS
    excluded; a walk the grammar ends stops there)."""
    rng = np.random.default_rng(seed)
    eos = set(client.eos_token_ids)
    ids = list(range(1, count + 1))
    for i in ids:
        client.open(i, constraint)
    client.wait_ready(ids)
    walks: List[List[int]] = [[] for _ in ids]
    live = list(range(count))
    rows = np.zeros((count, client.words_per_row), np.uint32)
    last: Dict[int, List[int]] = {i: [] for i in live}
    for _ in range(length):
        if not live:
            break
        client.submit_step([ids[i] for i in live],
                           accepted=[last[i] for i in live])
        client.wait_masks(rows)
        still = []
        for k, i in enumerate(live):
            allowed = np.flatnonzero(np.unpackbits(
                rows[k].view(np.uint8), bitorder="little")
                [:client.vocab_size])
            allowed = [t for t in allowed.tolist() if t not in eos] \
                if len(allowed) < 64 else allowed[~np.isin(allowed,
                                                           list(eos))]
            if len(allowed) == 0:
                last[i] = []
                continue
            t = int(allowed[rng.integers(len(allowed))])
            walks[i].append(t)
            last[i] = [t]
            still.append(i)
        live = still
    for i in ids:
        client.close_sequence(i)
    return walks


def _schedule(walks, steps):
    """Per step, per sequence: None (start over) or the token to accept
    (-1: none yet)."""
    for s in range(steps):
        yield [(None if (s % len(w) == 0 and s > 0) else
                (w[s % len(w) - 1] if s % len(w) else -1)) for w in walks]


class _Request:
    """What vLLM's manager reads of a request."""

    def __init__(self, grammar):
        self.structured_output_request = types.SimpleNamespace(
            grammar=grammar)


class _Manager:
    """What the plugin's batched grammar_bitmask reads of vLLM's manager
    (no reasoning parser: every request fills)."""

    reasoner = None

    def __init__(self, bitmask):
        self._grammar_bitmask = bitmask

    def should_fill_bitmask(self, request):
        return True


class _BatchInfo:
    """What the plugin's update_regex_vocab_mask reads of SGLang's
    SamplingBatchInfo."""

    def __init__(self, grammars, vocab_size):
        self.grammars = grammars
        self.vocab_size = vocab_size
        self.device = "cpu"
        self.vocab_mask = None
        self.apply_mask_func = None

    def update_regex_vocab_mask(self):
        # What SGLang's own does (the plugin replaces it): the first grammar
        # allocates the batch's mask and applies it; each live grammar fills
        # its row.
        first = next(g for g in self.grammars if g is not None)
        self.vocab_mask = first.allocate_vocab_mask(
            self.vocab_size, len(self.grammars), self.device)
        self.apply_mask_func = first.apply_vocab_mask
        for i, g in enumerate(self.grammars):
            if g is not None and not g.finished and not g.is_terminated():
                g.fill_vocab_mask(self.vocab_mask, i)
        self.vocab_mask = first.move_vocab_mask(self.vocab_mask, self.device)


class CApi:
    """The C++ client through its C ABI, with arrays made before the clock:
    SubmitStep + WaitMasks and two ctypes calls."""

    def __init__(self, target, tokenizer, constraint, spec, walks):
        self.client = Client(target, tokenizer)
        self.constraint = constraint
        self.walks = walks
        n = len(walks)
        self.ids = np.arange(1, n + 1, dtype=np.uint64)
        self.next_id = n + 1
        for i in self.ids.tolist():
            self.client.open(i, constraint)
        self.client.wait_ready(self.ids.tolist())
        self.rows = np.zeros((n, self.client.words_per_row), np.uint32)
        self.codes = np.zeros(n, np.int32)
        self.flags = np.zeros(n, np.uint8)

    def step(self, todo):
        c = self.client
        lengths = np.zeros(len(todo) + 1, np.int64)
        tokens = []
        restart = []
        for i, t in enumerate(todo):
            if t is None:
                restart.append(i)
            elif t >= 0:
                tokens.append(t)
            lengths[i + 1] = lengths[i] + (t is not None and t >= 0)
        accepted = np.array(tokens, np.int32)
        lib, h = c._lib, c._handle
        start = time.perf_counter()
        # New requests are closed and opened inside the step, as in cpp
        # and the adapters (each is a write to the stream).
        for i in restart:
            c.close_sequence(int(self.ids[i]))
            self.ids[i] = self.next_id
            c.open(self.next_id, self.constraint)
            self.next_id += 1
        code = lib.grammard_client_submit_step(
            h, len(todo), self.ids.ctypes.data, None, lengths.ctypes.data,
            accepted.ctypes.data, None, None)
        code = code or lib.grammard_client_wait_masks_at(
            h, self.rows.ctypes.data, c.words_per_row, len(todo), None, 0,
            self.codes.ctypes.data, self.flags.ctypes.data)
        c._check(code)
        return time.perf_counter() - start

    def close(self):
        self.client.close()


class Vllm:
    """vLLM's calls: accept_tokens per request (as update_from_output makes
    them), then the plugin's grammar_bitmask for a batch without drafts, its
    per-request checks included (rows: is_terminated and fill_bitmask per
    request, the contract without the plugin)."""

    def __init__(self, target, tokenizer, constraint, spec, walks,
                 rows_path=False):
        from .vllm import GrammardBackend
        from .vllm_plugin import _batched_bitmask
        self.batched = _batched_bitmask
        client = Client(target, tokenizer)
        self.backend = GrammardBackend(
            None, None, client.vocab_size, client=client,
            json_options=constraints.JsonOptions(whitespace="compact"))
        self.spec = spec
        self.names = [f"r{i}" for i in range(len(walks))]
        self.requests = {
            name: _Request(self.backend.compile_grammar("JSON", spec))
            for name in self.names}
        self.manager = _Manager(
            self.backend.allocate_token_bitmask(len(walks)))
        self.rows_path = rows_path

    def step(self, todo):
        # New requests' grammars come from vLLM's compile pool, not from
        # the step: made before the clock starts.
        fresh = {i: self.backend.compile_grammar("JSON", self.spec)
                 for i, t in enumerate(todo) if t is None}
        names, requests = self.names, self.requests
        start = time.perf_counter()
        for i, t in enumerate(todo):
            so = requests[names[i]].structured_output_request
            if t is None:
                so.grammar = fresh[i]
            elif t >= 0:
                so.grammar.accept_tokens(names[i], [t])
        grammars = [requests[name].structured_output_request.grammar
                    for name in names]
        if self.rows_path:
            bitmask = self.manager._grammar_bitmask
            for i, g in enumerate(grammars):
                if not g.is_terminated():
                    g.fill_bitmask(bitmask, i)
        else:
            self.batched(self.manager, self.backend, requests, names,
                         grammars)
        return time.perf_counter() - start

    def close(self):
        self.backend.destroy()


class _NullGrammar:
    """A grammar that does nothing: the engines' own side of their calls."""

    finished = False

    def accept_tokens(self, request_id, tokens):
        return True

    def accept_token(self, token):
        pass


class VllmEngine:
    """The part of Vllm's step that is vLLM's own: accept_tokens per
    request, on grammars that do nothing, and the lookup of each request's
    grammar that its grammar_bitmask makes with any backend."""

    def __init__(self, target, tokenizer, constraint, spec, walks):
        self.names = [f"r{i}" for i in range(len(walks))]
        self.requests = {name: _Request(_NullGrammar())
                         for name in self.names}

    def step(self, todo):
        names, requests = self.names, self.requests
        start = time.perf_counter()
        for i, t in enumerate(todo):
            so = requests[names[i]].structured_output_request
            if t is not None and t >= 0:
                so.grammar.accept_tokens(names[i], [t])
        [requests[name].structured_output_request.grammar for name in names]
        return time.perf_counter() - start

    def close(self):
        pass


class SglangEngine:
    """The part of Sglang's step that is SGLang's own: accept_token and
    `finished` per request, on grammars that do nothing."""

    def __init__(self, target, tokenizer, constraint, spec, walks):
        self.grammars = [_NullGrammar() for _ in walks]

    def step(self, todo):
        grammars = self.grammars
        start = time.perf_counter()
        for i, t in enumerate(todo):
            if t is not None and t >= 0:
                g = grammars[i]
                g.accept_token(t)
                g.finished = False
        return time.perf_counter() - start

    def close(self):
        pass


class Sglang:
    """SGLang's calls: accept_token and `finished` per request (as its
    output processing makes them), then the plugin's
    update_regex_vocab_mask (rows: SGLang's own, allocate_vocab_mask and
    fill_vocab_mask per request, the contract without the plugin)."""

    def __init__(self, target, tokenizer, constraint, spec, walks,
                 rows_path=False):
        from .sglang import GrammardGrammarBackend
        from .sglang_plugin import patch_batch_info

        class Patched(_BatchInfo):
            pass

        patch_batch_info(Patched)
        client = Client(target, tokenizer)
        self.backend = GrammardGrammarBackend(
            None, client.vocab_size, client=client,
            json_options=constraints.JsonOptions(whitespace="compact"))
        self.template = self.backend._init_value_dispatch(("json", spec))
        self.grammars = [self.template.copy() for _ in walks]
        self.info = (_BatchInfo if rows_path else Patched)(
            self.grammars, client.vocab_size)

    def step(self, todo):
        # New requests get their grammar at admission, not in the step.
        fresh = {i: self.template.copy() for i, t in enumerate(todo)
                 if t is None}
        grammars = self.grammars
        start = time.perf_counter()
        for i, t in enumerate(todo):
            if t is None:
                grammars[i] = fresh[i]
            elif t >= 0:
                g = grammars[i]
                g.accept_token(t)
                g.finished = False
        self.info.update_regex_vocab_mask()
        return time.perf_counter() - start

    def close(self):
        self.backend.shutdown()


RUNNERS = {
    "capi": CApi,
    "vllm": Vllm,
    "sglang": Sglang,
    "vllm_engine": VllmEngine,
    "sglang_engine": SglangEngine,
    "vllm_rows": lambda *a: Vllm(*a, rows_path=True),
    "sglang_rows": lambda *a: Sglang(*a, rows_path=True),
}


def interleaved(paths, target, tokenizer, constraint, spec, walks, warmup,
                steps):
    """Per path, the p50 of its step times (us), the paths taking turns
    step by step against one daemon, so that they share its state and the
    machine's; and per adapter path (with capi run) what it adds (us): the
    median over steps of its time less capi's less its engine's own
    (``*_engine``, where run) at the same step."""
    runners = {p: RUNNERS[p](target, tokenizer, constraint, spec, walks)
               for p in paths}
    times = {p: [] for p in paths}
    for s, todo in enumerate(_schedule(walks, warmup + steps)):
        for p, runner in runners.items():
            t = runner.step(todo)
            if s >= warmup:
                times[p].append(t)
    for runner in runners.values():
        runner.close()
    p50 = {p: statistics.median(t) * 1e6 for p, t in times.items()}
    adds = {}
    if "capi" in times:
        for p in paths:
            if p == "capi" or p.endswith("_engine"):
                continue
            engine = times.get(p.split("_")[0] + "_engine")
            adds[p] = statistics.median(
                t - c - (engine[i] if engine else 0.0)
                for i, (t, c) in enumerate(zip(times[p], times["capi"]))
            ) * 1e6
    return p50, adds


def run_cpp(binary, target, tokenizer, constraint, walks, warmup, steps):
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "constraint.pb")
        t = os.path.join(d, "trajectories.txt")
        with open(c, "wb") as f:
            f.write(constraint)
        with open(t, "w") as f:
            for w in walks:
                f.write(" ".join(map(str, w)) + "\n")
        out = subprocess.run(
            [binary, f"--target={target}", f"--tokenizer={tokenizer}",
             f"--constraint={c}", f"--trajectories={t}",
             f"--warmup={warmup}", f"--steps={steps}"],
            check=True, capture_output=True, text=True).stdout
    fields = dict(kv.split("=") for kv in out.split()[1:])
    return float(fields["step_p50_us"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True)
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--schema", required=True, help="JSON Schema file")
    p.add_argument("--cpp-bench", required=True,
                   help="the client_step_bench binary")
    p.add_argument("--batches", default="1,64,256")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--paths", default=",".join(DEFAULT_PATHS),
                   help="of " + ",".join(PATHS))
    p.add_argument("--cpus", default="",
                   help="cores to run on, e.g. 0 or 0,2 (default: any)")
    args = p.parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    with open(args.schema) as f:
        spec = json.dumps(json.load(f))
    constraint = constraints.json_schema(spec, whitespace="compact").encode()
    batches = [int(b) for b in args.batches.split(",")]
    paths = args.paths.split(",")
    client = Client(args.target, args.tokenizer)
    client.compile(constraint)
    walks_all = trajectories(client, constraint, max(batches),
                             args.warmup + args.steps, seed=1)
    client.close()
    print(f"trajectories: {len(walks_all)}, mean length "
          f"{statistics.mean(len(w) for w in walks_all):.0f} tokens",
          file=sys.stderr)
    p50: Dict[tuple, List[float]] = {}
    in_process = [p for p in paths if p != "cpp"]
    adds: Dict[tuple, List[float]] = {}
    for run in range(args.runs):
        for b in batches:
            walks = walks_all[:b]
            got = {}
            if "cpp" in paths:
                got["cpp"] = run_cpp(args.cpp_bench, args.target,
                                     args.tokenizer, constraint, walks,
                                     args.warmup, args.steps)
            in_p50, in_adds = interleaved(in_process, args.target,
                                          args.tokenizer, constraint, spec,
                                          walks, args.warmup, args.steps)
            got.update(in_p50)
            for path, us in got.items():
                p50.setdefault((b, path), []).append(us)
            for path, us in in_adds.items():
                adds.setdefault((b, path), []).append(us)
            print(f"RESULT run={run + 1} batch={b} " + " ".join(
                f"{path}_p50_us={us:.1f}" for path, us in got.items())
                + "".join(f" {path}_adds_us={us:.1f}"
                          for path, us in in_adds.items()), flush=True)
    for b in batches:
        med = {path: statistics.median(p50[(b, path)]) for path in paths}
        line = f"MEDIAN batch={b} " + " ".join(
            f"{path}_p50_us={us:.1f}" for path, us in med.items())
        for path in paths:
            if (b, path) in adds:
                us = statistics.median(adds[(b, path)])
                line += (f" {path}_adds_us={us:.1f}"
                         f" ({100 * us / med['capi']:.1f}%)")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
