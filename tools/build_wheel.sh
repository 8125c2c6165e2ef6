#!/usr/bin/env bash
# Builds the grammard Python wheel (the package and libgrammard_client.so in
# it) into dist/; with --install, also installs it into Debian's python3.
#   tools/build_wheel.sh [--install]
# Elsewhere (an engine's image or a virtualenv): pip install dist/grammard-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >&2
bazel build //client:libgrammard_client.so >&2
wheel=$(python/make_wheel.sh bazel-bin/client/libgrammard_client.so dist)
echo "$wheel"
if [ "${1:-}" = --install ]; then
  # Debian marks its python3 externally managed (PEP 668); the wheel's only
  # dependency, numpy, comes from python3-numpy.
  /usr/bin/python3 -m pip install --quiet --no-deps --no-index \
    --force-reinstall --break-system-packages "$wheel"
fi
