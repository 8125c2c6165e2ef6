"""The constraints the contract drivers generate under, one per vLLM request
type, each with a check of the text it produced; and the seeded "model":
logits per (request seed, position), so that a generation's tokens depend
only on its seed and its masks, whatever the batching, drafts or restarts.

The logits are random (torch, seeded), with two nudges so that generations
end in a few dozen tokens: from position 6 on, tokens that close strings,
objects and arrays, and EOS, get a boost (the mask still decides what is
allowed); and a structural tag's begin string is boosted at the start so
that tags occur.
"""

import json
import re

import jsonschema
import numpy as np
import torch

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                 "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
EMAIL = r"[a-z]{1,5}@[a-z]{1,4}\.(com|org)"
ARITH_EBNF = ('root ::= num op num\n'
              'op ::= "+" | "-" | "*"\n'
              'num ::= [1-9] [0-9]? [0-9]?\n')
ARITH_RE = r"[1-9][0-9]{0,2}[-+*][1-9][0-9]{0,2}"
CHOICES = ["yes", "no", "maybe", "not sure"]
TOOL_SCHEMA = {"type": "object",
               "properties": {"city": {"enum": ["Paris", "Oslo"]},
                              "days": {"type": "integer", "minimum": 1,
                                       "maximum": 9}},
               "required": ["city", "days"], "additionalProperties": False}
TAG_BEGIN, TAG_END = "<tool=weather>", "</tool>"
STRUCTURAL_TAG = {"structures": [{"begin": TAG_BEGIN, "schema": TOOL_SCHEMA,
                                  "end": TAG_END}],
                  "triggers": ["<tool="]}


def _json_ok(schema):
    def check(text):
        jsonschema.validate(json.loads(text), schema)
    return check


def _regex_ok(pattern):
    def check(text):
        assert re.fullmatch(pattern, text), f"{text!r} !~ {pattern}"
    return check


def _choice_ok(text):
    assert text in CHOICES, text


def _object_ok(text):
    assert isinstance(json.loads(text), dict), text


def _tags_ok(text):
    tags = re.findall(re.escape(TAG_BEGIN) + "(.*?)" + re.escape(TAG_END),
                      text, re.S)
    assert tags, f"no tag in {text!r}"
    for body in tags:
        jsonschema.validate(json.loads(body), TOOL_SCHEMA)


# vLLM request type -> (grammar_spec as vLLM keys it, check of the text)
CASES = {
    "JSON": (json.dumps(PERSON_SCHEMA), _json_ok(PERSON_SCHEMA)),
    "JSON_OBJECT": ("", _object_ok),
    "REGEX": (EMAIL, _regex_ok(EMAIL)),
    "GRAMMAR": (ARITH_EBNF, _regex_ok(ARITH_RE)),
    "CHOICE": (json.dumps(CHOICES), _choice_ok),
    "STRUCTURAL_TAG": (json.dumps(STRUCTURAL_TAG), _tags_ok),
}

# SGLang keys for the same constraints (it has no choice kind: an EBNF).
SGLANG_KEYS = {
    "JSON": ("json", json.dumps(PERSON_SCHEMA)),
    "JSON_OBJECT": ("json", "$$ANY$$"),
    "REGEX": ("regex", EMAIL),
    "GRAMMAR": ("ebnf", ARITH_EBNF),
    "CHOICE": ("ebnf", "root ::= " + " | ".join(json.dumps(c)
                                                 for c in CHOICES)),
    "STRUCTURAL_TAG": ("structural_tag", json.dumps(STRUCTURAL_TAG)),
}


class Model:
    """Seeded logits over a vocabulary (see the module doc)."""

    def __init__(self, detok, vocab_size, eos):
        self.vocab_size = vocab_size
        self.eos = eos
        closers = [i for i, b in enumerate(detok.bytes[:vocab_size])
                   if i not in detok.special and b and b[-1:] in b'"}])0123456789']
        self.closers = torch.tensor(closers, dtype=torch.long)
        self.begin = greedy_tokens(detok, TAG_BEGIN)

    def logits(self, seed, position):
        g = torch.Generator().manual_seed(seed * 1_000_003 + position)
        x = torch.randn(self.vocab_size, generator=g)
        if position >= 6:
            x[self.closers] += 6.0
            x[self.eos] += 12.0
        if position < len(self.begin):
            x[self.begin[position]] += 30.0
        return x


def greedy_tokens(detok, text):
    """A tokenization of `text`, longest vocabulary match first."""
    data = text.encode("utf-8")
    out = []
    i = 0
    while i < len(data):
        for j in range(len(data), i, -1):
            t = detok.ids.get(data[i:j])
            if t is not None:
                out.append(t)
                i = j
                break
        else:
            raise ValueError(f"no token for {data[i:]!r}")
    return out


def allowed(row, token):
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def masked_argmax(logits, row_words, vocab_size):
    """The sampler: greedy over the tokens a packed row allows (numpy
    uint32/int32 words), the mask applied by unpacking bits in torch, the
    way an engine without grammard's kernel would."""
    bits = np.unpackbits(np.asarray(row_words).view(np.uint8),
                         bitorder="little")[:vocab_size].astype(bool)
    masked = logits.masked_fill(~torch.from_numpy(bits), float("-inf"))
    return int(torch.argmax(masked))


class Request:
    """A request as a driver tracks it: its grammar (or the Future of it),
    the tokens it produced, the drafts it will verify next."""

    def __init__(self, rid, seed):
        self.rid = rid
        self.seed = seed
        self.future = None
        self.grammar = None
        self.output = []
        self.drafts = []
        self.done = False


class Driver:
    """What both engine drivers share: the greedy model's verification of a
    request's step (drafts kept while the model agrees, then its own
    token), tokens forced in place of the model's to test refusals, and the
    loop of steps."""

    def __init__(self, model, refuse, max_tokens):
        self.model = model
        # (rid, position) -> a token forced in place of the sampled one
        self.refuse = dict(refuse or {})
        self.max_tokens = max_tokens
        self.requests = {}
        self.steps = 0

    def sample(self, r, rows):
        """The tokens request r takes this step, `rows` its mask rows (one
        per draft, plus one)."""
        p = len(r.output)
        accepted = []
        for k, row in enumerate(rows):
            t = masked_argmax(self.model.logits(r.seed, p + k), row,
                              self.model.vocab_size)
            accepted.append(t)
            if k == len(r.drafts) or r.drafts[k] != t or t == self.model.eos:
                break
        forced = self.refuse.pop((r.rid, p), None)
        return accepted if forced is None else [forced]

    def ends(self, r, accepted):
        return (r.grammar.is_terminated() or self.model.eos in accepted
                or len(r.output) >= self.max_tokens)

    def run(self, max_steps=400):
        for _ in range(max_steps):
            if not self.step():
                return
        raise AssertionError(f"requests still running after {max_steps} "
                             f"steps")
