#!/usr/bin/env bash
# Fails when a C++ or CUDA source of ours is not clang-format clean (Google
# style, .clang-format at the root). Runs on the real source tree, found
# through the runfiles symlink of //:WORKSPACE.
set -euo pipefail
root=$(dirname "$(readlink -f "$TEST_SRCDIR/grammard/WORKSPACE")")
cd "$root"
dirs=()
for d in grammar service client gpu tests tools proto; do
  [ -d "$d" ] && dirs+=("$d")
done
files=$(find "${dirs[@]}" \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -type f | sort)
[ -n "$files" ] || { echo "no sources found under $root"; exit 1; }
bad=0
for f in $files; do
  if ! clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not clang-format clean: $f (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad
