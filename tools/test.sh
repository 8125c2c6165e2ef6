#!/usr/bin/env bash
# Sets up what is missing, then builds and runs the whole test suite. The last
# line is "N passed, N failed" (after "N skipped"), counted per test case. Extra
# arguments go to `bazel test` (e.g. --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

targets=$(bazel query 'tests(//...)') || { echo "bazel query failed"; exit 1; }
events=$(mktemp)
trap 'rm -f "$events"' EXIT
bazel test --keep_going --build_event_json_file="$events" "$@" $targets
rc=$?
[ "${CI:-}" = true ] && bazel shutdown
python3 tools/test_summary.py "$events" $targets
exit $rc
