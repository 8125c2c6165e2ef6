#!/usr/bin/env bash
# Runs tests under the sanitizers, each stage in a Bazel output base of its
# own (its copts differ from the main build's, which would otherwise be
# rebuilt from scratch every time):
#   asan  AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer
#         (--config=asan_ubsan) over the unit tests of grammar/, proto/,
#         service/, client/, gpu/ and tools/grammarctl/ and the decode and
#         bad-input whole-system tests (SANITIZE_ALL=1: the whole suite);
#   tsan  ThreadSanitizer (--config=tsan) over service/, client/ and
#         tools/grammarctl/ (SANITIZE_ALL=1: and the whole-system tests that
#         drive them).
# Tests skip as they do in the main run when data or tools are missing.
# For each stage it leaves .sanitize/<stage>.targets (one label a line) and
# .sanitize/<stage>.events (Bazel's build events), which tools/test.sh hands
# to tools/test_summary.py (--stage): every test case counts in the summary,
# as <stage>:<label>. Exits 1 if any test failed or did not build.
#   tools/sanitize.sh [STAGE...]       (default: asan tsan)
# Extra `bazel test` flags go in SANITIZE_FLAGS; output bases default to
# ~/.cache/grammard_<stage> (SANITIZE_OUTPUT_BASE=DIR: DIR_<stage>).
set -uo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(asan tsan)

# What CI has time for (SANITIZE_ALL=1: everything below). ASan+UBSan: the
# unit tests of the engine, the wire format, the daemon, the client and
# grammarctl, and the whole-system decode and bad-input tests. Left to
# SANITIZE_ALL: deploy/ (packaging checks), the conformance and load suites
# and the other whole-system tests, which TSan's full run covers.
ASAN_TARGETS='tests(//grammar/... + //proto/... + //service/... + //client/...
  + //gpu/... + //third_party/... + //tests/support/...
  + //tools/grammarctl/...)
  + //tests/integration:decode_test + //tests/integration:bad_input_test'
# TSan: the threads live in service/ and client/ (grammarctl_test runs the
# TSan-built daemon and grammarctl, a client); absl_mutex_tsan_test checks
# that TSan sees the system Abseil's locking. SANITIZE_ALL adds the
# whole-system tests, which run the TSan-built daemon and client together.
TSAN_TARGETS='tests(//service/... + //client/... + //third_party/...
  + //tools/grammarctl/...)'
if [ "${SANITIZE_ALL:-0}" != 0 ]; then
  ASAN_TARGETS='tests(//...)'
  TSAN_TARGETS="$TSAN_TARGETS + tests(//tests/integration/...)"
fi
# Nothing a sanitizer can look into: the format check (clang-format over the
# tree); and tests tagged "container" (deploy/image_test), which put the
# binaries in an image without the sanitizers' runtimes. Looked for in
# deploy/ only: under another output base, //... would also walk the main
# output base through the bazel-<workspace> symlink.
CONTAINER_TESTS='attr(tags, "[\[ ]container[,\]]", tests(//deploy/...))'
ASAN_SKIP="//tools:format_test + $CONTAINER_TESTS"
# python3 (uninstrumented) loading the instrumented client library; and the
# bad-input catalogue, whose 3 s compile deadline TSan's slowdown overruns
# (the ASan stage runs it).
TSAN_SKIP="//client:grammard_client_ctypes_test + //tests/integration:bad_input_test
  + $CONTAINER_TESTS"

# Line tables only (-g1): reports keep their file:line, and the stage
# compiles in about 60% of the time full debug information takes.
common=(--copt=-g1)

mkdir -p .sanitize
failed=0
for stage in "${stages[@]}"; do
  case "$stage" in
    asan) config=asan_ubsan query="($ASAN_TARGETS) except ($ASAN_SKIP)" ;;
    tsan) config=tsan query="($TSAN_TARGETS) except ($TSAN_SKIP)" ;;
    *) echo "sanitize: unknown stage $stage (asan, tsan)" >&2; exit 2 ;;
  esac
  base=${SANITIZE_OUTPUT_BASE:-$HOME/.cache/grammard}_$stage
  bazel_stage() { bazel --output_base="$base" "$@"; }
  rm -f ".sanitize/$stage.events"
  if ! bazel_stage query "$query" >".sanitize/$stage.targets" 2>".sanitize/$stage.log"; then
    tail -20 ".sanitize/$stage.log"
    echo "sanitize: $stage: bazel query failed" >&2
    failed=1
    continue
  fi
  echo "sanitize: $stage: $(wc -l <".sanitize/$stage.targets") test targets, --config=$config" >&2
  # shellcheck disable=SC2046,SC2086
  bazel_stage test --config="$config" --symlink_prefix=".sanitize/$stage-" \
    --keep_going --build_event_json_file=".sanitize/$stage.events" \
    "${common[@]}" ${SANITIZE_FLAGS:-} $(cat ".sanitize/$stage.targets") || failed=1
  [ "${CI:-}" = true ] && bazel_stage shutdown
done
exit $failed
