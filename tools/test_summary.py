"""Prints "N skipped" then "N passed, N failed" for a `bazel test` run,
counted per test case from the test.xml of each target, as listed in the
run's build event file (cached results included).
Usage: test_summary.py BUILD_EVENTS_JSON [--fuzz FUZZ_RESULTS] TARGET...
A target with no test result (it did not build) counts as one failure.
FUZZ_RESULTS holds tools/fuzz.sh's lines "fuzz <target> passed|failed ...",
one case each."""
import json
import sys
import urllib.parse
import xml.etree.ElementTree as ET

events_path, targets = sys.argv[1], sys.argv[2:]
fuzz_path = None
if targets[:1] == ["--fuzz"]:
    fuzz_path, targets = targets[1], targets[2:]
xml_files = {}  # label -> [test.xml paths], one per shard/run
with open(events_path) as f:
    for line in f:
        event = json.loads(line)
        result_id = event.get("id", {}).get("testResult")
        if not result_id:
            continue
        for output in event.get("testResult", {}).get("testActionOutput", []):
            if output.get("name") == "test.xml":
                path = urllib.parse.urlparse(output["uri"]).path
                xml_files.setdefault(result_id["label"], []).append(path)

passed = failed = skipped = 0
for label in targets:
    paths = xml_files.get(label)
    if not paths:
        print(f"no result for {label}", file=sys.stderr)
        failed += 1
        continue
    for path in paths:
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            cases = []
        if not cases:  # a crash before any case ran, or no readable result
            print(f"no test cases in the result of {label}", file=sys.stderr)
            failed += 1
            continue
        for case in cases:
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.get("result") == "skipped" or case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
if fuzz_path:
    with open(fuzz_path) as f:
        for line in f:
            words = line.split()
            if len(words) >= 3 and words[0] == "fuzz":
                if words[2] == "passed":
                    passed += 1
                else:
                    failed += 1
# Skips (no GPU, no shared data) get a line of their own: the last line is
# exactly "N passed, N failed", which CI reads.
print(f"{skipped} skipped")
print(f"{passed} passed, {failed} failed")
