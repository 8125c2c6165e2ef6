#!/usr/bin/env bash
# python_test: the package's tests (python/tests) under Debian's python3,
# against the daemon and client library built here and the tokenizers
# tools/setup.sh installs beside the source tree. Skips, saying why, where
# Debian's numpy, torch, pytest or jsonschema are missing.
set -euo pipefail
runfiles="$TEST_SRCDIR/$TEST_WORKSPACE"
py=/usr/bin/python3
if ! "$py" -c "import numpy, torch, pytest, jsonschema" 2>/dev/null; then
  echo "SKIPPED: Debian's python3 lacks numpy, torch, pytest or jsonschema" \
    "(tools/setup.sh installs python3-numpy python3-torch python3-pytest" \
    "python3-jsonschema)"
  exit 0
fi
root=$(dirname "$(readlink -f "$runfiles/WORKSPACE")")
export GRAMMARD_DAEMON="$runfiles/service/grammard"
export GRAMMARD_CLIENT_LIBRARY="$runfiles/client/libgrammard_client.so"
export GRAMMARD_TOKENIZERS="${GRAMMARD_TOKENIZERS:-$root/.deps/tokenizers}"
export PYTHONDONTWRITEBYTECODE=1
cd "$runfiles/python"
exec "$py" -m pytest -q -p no:cacheprovider -rs \
  --junitxml="${XML_OUTPUT_FILE:-$TEST_TMPDIR/pytest.xml}" tests "$@"
