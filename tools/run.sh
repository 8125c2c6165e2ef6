#!/usr/bin/env bash
# Sets up what is missing, then builds and starts the grammard daemon with its
# embedded defaults (local cache only, no Redis). Extra arguments go to the
# daemon, e.g. tools/run.sh --tokenizer_dir=/models/tokenizers
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
exec bazel run //service:grammard -- --tokenizer_dir="$PWD/.deps/tokenizers" "$@"
