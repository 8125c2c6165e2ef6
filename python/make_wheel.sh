#!/usr/bin/env bash
# Builds the grammard wheel from this folder's package and a built
# libgrammard_client.so, with Debian's python3 and its setuptools and wheel
# (no network): python/make_wheel.sh LIBRARY OUT_DIR
set -euo pipefail
library=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# -L: under Bazel the sources are symlinks into the source tree.
cp -L "$here/pyproject.toml" "$here/setup.py" "$here/README.md" "$stage/"
mkdir "$stage/grammard"
cp -L "$here"/grammard/*.py "$stage/grammard/"
cp -L "$library" "$stage/grammard/libgrammard_client.so"
chmod u+w "$stage/grammard/libgrammard_client.so"
cd "$stage"
/usr/bin/python3 -m pip wheel --quiet --no-deps --no-build-isolation \
  --no-index --wheel-dir "$out" . >&2
ls "$out"/grammard-*.whl
