"""python -m grammard.bench runs end to end (briefly) and prints the lines
the issue's figures are read from."""

import json
import re

from grammard import bench


def test_bench_prints_results_and_medians(daemon, llama3, tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({
        "type": "object", "properties": {"id": {"type": "integer"}},
        "required": ["id"]}))
    assert bench.main([
        f"--target={daemon.target}", f"--schema={schema}",
        "--cpp-bench=unused", "--batches=1,3", "--steps=4", "--warmup=1",
        "--runs=2", "--paths=capi,vllm,sglang,vllm_engine,sglang_engine,"
        "vllm_rows,sglang_rows"]) == 0
    out = capsys.readouterr().out.splitlines()
    results = [line for line in out if line.startswith("RESULT")]
    medians = [line for line in out if line.startswith("MEDIAN")]
    assert len(results) == 4 and len(medians) == 2
    for line in medians:
        for path in ("vllm", "sglang", "vllm_rows", "sglang_rows"):
            assert re.search(rf" {path}_adds_us=-?[0-9.]+ \(", line), line
        assert re.search(r" vllm_engine_p50_us=[0-9.]+", line), line
