#!/bin/bash
# Runs grammard_client_ctypes_test.py beside libgrammard_client.so; skips
# (passes, saying so) where the machine has no python3.
set -euo pipefail
if ! command -v python3 >/dev/null; then
  echo "SKIPPED: no python3 on this machine"
  exit 0
fi
exec python3 "$(dirname "$0")/grammard_client_ctypes_test.py"
