#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, in an
# output base of their own) and runs each for SECONDS (default 60), starting
# from seeds taken from ../shared/data and what earlier runs kept in
# .fuzz/corpus. A crash, leak or timeout fails its target and leaves the
# input in .fuzz/crashes/<target>/ (turn it into a regression test).
# Prints "fuzz <target> passed|failed runs=N" per target; exits 1 if any
# failed.
#   tools/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ebnf_fuzzer regex_fuzzer json_schema_fuzzer
  tokenizer_fuzzer mask_rows_fuzzer decode_step_fuzzer)
output_base=${FUZZ_OUTPUT_BASE:-$HOME/.cache/grammard_fuzz}
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
mkdir -p .fuzz
if ! bazel --output_base="$output_base" build --config=fuzz \
    --symlink_prefix=.fuzz/bazel- "${labels[@]}" >.fuzz/build.log 2>&1; then
  tail -30 .fuzz/build.log
  for t in "${targets[@]}"; do echo "fuzz $t failed runs=0 (build failed)"; done
  exit 1
fi
python3 tools/fuzz_seeds.py ../shared/data .fuzz/seeds
failed=0
for t in "${targets[@]}"; do
  mkdir -p ".fuzz/corpus/$t" ".fuzz/crashes/$t" ".fuzz/seeds/$t"
  timeout $((seconds + 120)) ".fuzz/bazel-bin/tests/fuzz/$t" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -artifact_prefix=".fuzz/crashes/$t/" ".fuzz/corpus/$t" ".fuzz/seeds/$t" \
    >".fuzz/$t.log" 2>&1
  rc=$?
  runs=$(grep -o 'Done [0-9]* runs' ".fuzz/$t.log" | grep -o '[0-9]*' | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz $t passed runs=${runs:-0}"
  else
    failed=1
    echo "fuzz $t failed runs=${runs:-0} (see .fuzz/$t.log)"
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer)|runtime error' ".fuzz/$t.log"
  fi
done
[ "${CI:-}" = true ] && bazel --output_base="$output_base" shutdown
exit $failed
