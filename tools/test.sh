#!/usr/bin/env bash
# Sets up what is missing, then builds and runs the whole test suite, the
# sanitizer stage (tools/sanitize.sh: ASan+UBSan over the suite, TSan over
# service/ and client/; SANITIZE=0 for none) and a short run of every fuzzer
# (tools/fuzz.sh, FUZZ_SECONDS each: 30 by default, 0 for none). The last
# line is "N passed, N failed" (after "N skipped"), counted per test case
# (the sanitizer stage's cases again, as asan:<label> and tsan:<label>) and
# per fuzzer. Extra arguments go to the main `bazel test` (e.g.
# --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

targets=$(bazel query 'tests(//...)') || { echo "bazel query failed"; exit 1; }
events=$(mktemp)
fuzz_results=$(mktemp)
trap 'rm -f "$events" "$fuzz_results"' EXIT
bazel test --keep_going --build_event_json_file="$events" "$@" $targets
rc=$?
[ "${CI:-}" = true ] && bazel shutdown
stages=()
if [ "${SANITIZE:-1}" != 0 ]; then
  tools/sanitize.sh asan tsan || rc=1
  for stage in asan tsan; do
    stages+=(--stage "$stage" ".sanitize/$stage.events" ".sanitize/$stage.targets")
  done
fi
if [ "${FUZZ_SECONDS:-30}" -gt 0 ]; then
  tools/fuzz.sh "${FUZZ_SECONDS:-30}" | tee "$fuzz_results" || rc=1
fi
python3 tools/test_summary.py "$events" --fuzz "$fuzz_results" "${stages[@]}" $targets
exit $rc
