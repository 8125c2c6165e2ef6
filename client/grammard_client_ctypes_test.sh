#!/bin/bash
# Runs grammard_client_ctypes_test.py beside libgrammard_client.so; skips
# (passes, saying so) where the machine has no python3.
set -euo pipefail
if ! command -v python3 >/dev/null; then
  echo "SKIPPED: no python3 on this machine"
  exit 0
fi
# Under --config=asan the library is instrumented but python3 is not: ASan's
# runtime must then be loaded first (the config sets ASAN_OPTIONS).
if [ -n "${ASAN_OPTIONS:-}" ]; then
  LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
    exec python3 "$(dirname "$0")/grammard_client_ctypes_test.py"
fi
exec python3 "$(dirname "$0")/grammard_client_ctypes_test.py"
