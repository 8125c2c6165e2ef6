#!/usr/bin/env bash
# wheel_test: the wheel builds from a clean tree (make_wheel.sh), installs
# with pip (into a folder of its own, no network), and the installed package
# imports from another folder, loads the library it carries and registers
# both engines' plugin entry points. Skips where Debian's python3 lacks pip,
# setuptools or wheel.
set -euo pipefail
runfiles="$TEST_SRCDIR/$TEST_WORKSPACE"
py=/usr/bin/python3
if ! "$py" -c "import setuptools, wheel, pip" 2>/dev/null; then
  echo "SKIPPED: Debian's python3 lacks pip, setuptools or wheel" \
    "(tools/setup.sh installs python3-pip python3-setuptools python3-wheel)"
  exit 0
fi
dist="$TEST_TMPDIR/dist"
site="$TEST_TMPDIR/site"
wheel=$("$runfiles/python/make_wheel.sh" \
  "$runfiles/client/libgrammard_client.so" "$dist")
case "$(basename "$wheel")" in
  grammard-*-py3-none-linux_x86_64.whl) ;;
  *) echo "unexpected wheel name: $wheel"; exit 1 ;;
esac
"$py" -m pip install --quiet --no-deps --no-index --target "$site" "$wheel"
cd /
unset GRAMMARD_CLIENT_LIBRARY
PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$py" - "$site" <<'PY'
import importlib.metadata as md
import os
import sys

import grammard
from grammard import _native

site = sys.argv[1]
assert grammard.__file__.startswith(site), grammard.__file__
library = _native.library_path()
assert library == os.path.join(site, "grammard", "libgrammard_client.so"), library
groups = {"vllm.general_plugins": "grammard.vllm_plugin:register",
          "sglang.srt.plugins": "grammard.sglang_plugin:register"}
for group, value in groups.items():
    found = [e.value for e in md.entry_points(group=group) if e.name == "grammard"]
    assert found == [value], (group, found)
try:
    grammard.Client("127.0.0.1:1", "llama3", connect_timeout=0.2)
except grammard.Unavailable as e:
    assert "200 ms" in str(e), e
else:
    raise AssertionError("connected to nothing")
print("ok:", grammard.__version__, os.path.basename(sys.argv[1]))
PY
