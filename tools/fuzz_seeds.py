"""Seed corpora for tools/fuzz.sh, from ../shared/data (and ../shared/bench
beside it): grammars, regexes and JSON Schemas as they come, small
tokenizer.json files, and encoded StepResults. Without the data the
fuzzers start from the few built-in seeds only.
Usage: fuzz_seeds.py DATA_DIR OUT_DIR"""
import glob
import gzip
import json
import os
import sys

data, out = sys.argv[1], sys.argv[2]
bench = os.path.join(os.path.dirname(os.path.abspath(data)), "bench")
LIMIT = 300  # seeds per target: enough variety, quick to load


def write(target, name, blob):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(blob, str):
        blob = blob.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob)


def files(pattern):
    return sorted(glob.glob(pattern, recursive=True))[:LIMIT]


for i, path in enumerate(files(os.path.join(data, "grammars", "**", "*.*bnf")) +
                         files(os.path.join(bench, "*.ebnf"))):
    with open(path, "rb") as f:
        write("ebnf_fuzzer", f"g{i}", f.read() + b"\0\1\2\3\4\5\6\7")
write("ebnf_fuzzer", "builtin", 'root ::= "a" [0-9]+ ("," root)?\0\1\2\3')

patterns = []
jsonl = os.path.join(data, "regex", "jsonschemabench_patterns.jsonl")
if os.path.exists(jsonl):
    with open(jsonl) as f:
        for line in f:
            try:
                v = json.loads(line)
            except ValueError:
                continue
            p = v.get("pattern") if isinstance(v, dict) else v
            if isinstance(p, str):
                patterns.append(p)
            if len(patterns) >= LIMIT:
                break
for path in files(os.path.join(bench, "*.regex")):
    with open(path) as f:
        patterns.append(f.read().strip())
patterns.append(r"[a-z]{2,5}@(x|y)\.com")
for i, p in enumerate(patterns):
    write("regex_fuzzer", f"r{i}", p.encode() + b"\0\1\2\3\4\5")

# Small schemas only: each seed is compiled in full before fuzzing starts.
schemas = []
for path in sorted(glob.glob(os.path.join(data, "maskbench", "*.jsonl.gz"))):
    taken = 0
    with gzip.open(path, "rt") as f:
        for line in f:
            if taken >= LIMIT // 30:
                break
            try:
                v = json.loads(line)
            except ValueError:
                continue
            s = v.get("schema", v) if isinstance(v, dict) else v
            s = s if isinstance(s, str) else json.dumps(s)
            if len(s) <= 4096:
                schemas.append(s)
                taken += 1
for path in files(os.path.join(bench, "*schema*.json")):
    with open(path) as f:
        schemas.append(f.read())
schemas.append('{"type":"object","properties":{"a":{"type":"integer"}},'
               '"required":["a"]}')
for i, s in enumerate(schemas):
    write("json_schema_fuzzer", f"s{i}", s.encode() + b"\0\1\2\3\4\5")

write("tokenizer_fuzzer", "bpe", json.dumps({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 3, "content": "</s>", "special": True}]}) +
    '\0{"eos_token": "</s>"}')
write("tokenizer_fuzzer", "metaspace", json.dumps({
    "model": {"type": "BPE", "vocab": {"\u2581a": 0, "b": 1, "<0x41>": 2},
              "merges": []},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}]},
    "added_tokens": []}))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(number, blob):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(blob)) + blob


def row(kind, value):
    if kind == "same_as":
        return varint(7 << 3) + varint(value)
    if kind == "previous":
        return varint(8 << 3) + varint(1)
    return field({"allowed": 5, "forbidden": 6}[kind], value)


rows = [row("allowed", bytes([0, 1, 5, 0x81, 1])), row("forbidden", b"\3\3"),
        row("same_as", 0), row("previous", 0)]
result = b"".join(field(2, field(3, r)) for r in rows)
write("mask_rows_fuzzer", "step", bytes([3]) + result)
write("mask_rows_fuzzer", "bitmap",
      bytes([0]) + field(2, field(3, field(4, field(1, b"\xff\0\0\0")))))

write("decode_step_fuzzer", "walk", bytes([0, 0, 2, 0, 1, 0, 44, 0, 1, 0, 2]))
write("decode_step_fuzzer", "thinking", bytes([1, 0, 3, 0, 5, 0, 6, 1, 19]))
