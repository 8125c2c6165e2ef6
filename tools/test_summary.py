"""Prints "N skipped" then "N passed, N failed" for a `bazel test` run,
counted per test case from the test.xml of each target, as listed in the
run's build event file (cached results included).
Usage: test_summary.py BUILD_EVENTS_JSON [--fuzz FUZZ_RESULTS]
           [--stage NAME EVENTS TARGETS_FILE]... TARGET...
A target with no test result (it did not build) counts as one failure.
FUZZ_RESULTS holds tools/fuzz.sh's lines "fuzz <target> passed|failed ...",
one case each. Each --stage is another `bazel test` run (tools/sanitize.sh:
asan, tsan) over the targets listed in TARGETS_FILE, one a line; its cases
count like the main run's, reported as NAME:<label>."""
import json
import sys
import urllib.parse
import xml.etree.ElementTree as ET


def count(events_path, targets, prefix=""):
    """(passed, failed, skipped) over targets' test cases in a build event
    file; an unreadable or missing file leaves every target without a
    result."""
    xml_files = {}  # label -> [test.xml paths], one per shard/run
    try:
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
    except (OSError, ValueError):
        pass

    passed = failed = skipped = 0
    for label in targets:
        paths = xml_files.get(label)
        if not paths:
            print(f"no result for {prefix}{label}", file=sys.stderr)
            failed += 1
            continue
        for path in paths:
            try:
                cases = list(ET.parse(path).getroot().iter("testcase"))
            except (OSError, ET.ParseError):
                cases = []
            if not cases:  # a crash before any case ran, or no readable result
                print(f"no test cases in the result of {prefix}{label}", file=sys.stderr)
                failed += 1
                continue
            for case in cases:
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                elif case.get("result") == "skipped" or case.find("skipped") is not None:
                    skipped += 1
                else:
                    passed += 1
    return passed, failed, skipped


args = sys.argv[1:]
events_path, args = args[0], args[1:]
fuzz_path = None
stages = []  # (name, events, targets file)
while args[:1] in (["--fuzz"], ["--stage"]):
    if args[0] == "--fuzz":
        fuzz_path, args = args[1], args[2:]
    else:
        stages.append(tuple(args[1:4]))
        args = args[4:]
targets = args

passed, failed, skipped = count(events_path, targets)
for name, stage_events, targets_file in stages:
    try:
        with open(targets_file) as f:
            stage_targets = [line.strip() for line in f if line.strip()]
    except OSError:
        stage_targets = []
    if not stage_targets:  # its query failed
        print(f"no targets for stage {name}", file=sys.stderr)
        failed += 1
        continue
    p, f_, s = count(stage_events, stage_targets, name + ":")
    passed, failed, skipped = passed + p, failed + f_, skipped + s
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
