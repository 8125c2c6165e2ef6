#!/usr/bin/env bash
# Builds grammard's container image with Podman, without a registry, and
# prints its size. FROM debian:bookworm and debian:bookworm-slim resolve to
# local images this script makes once per machine (debootstrap from the
# Debian mirror apt already uses, then `podman import`) when Podman has none.
#
#   tools/build_image.sh [--tag=NAME:TAG] [--tokenizers="llama3 qwen3"]
#       The whole deploy/Dockerfile: Bazel builds the binaries inside the
#       build stage, its cache kept in a cache mount so that a rebuild only
#       recompiles what changed. Default tag: grammard:<git describe>.
#   tools/build_image.sh --binaries=DIR [...]
#       The Dockerfile's runtime stage alone, over binaries built on this
#       machine: DIR/service/grammard and DIR/tools/grammarctl/grammarctl,
#       e.g. bazel-bin after `bazel build -c opt //service:grammard
#       //tools/grammarctl`. What deploy/image_test does: minutes instead of
#       the build stage's much longer cold build.
#
# Podman reads deploy/podman/containers.conf (settings these machines need)
# unless CONTAINERS_CONF names another file. Needs root, podman, runc and
# debootstrap (tools/setup.sh installs them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

tag=""
binaries=""
tokenizers=""
for arg in "$@"; do
  case "$arg" in
    --tag=*) tag=${arg#--tag=} ;;
    --binaries=*) binaries=${arg#--binaries=} ;;
    --tokenizers=*) tokenizers=${arg#--tokenizers=} ;;
    *)
      echo "build_image: unknown argument $arg" >&2
      echo "usage: tools/build_image.sh [--binaries=DIR] [--tag=NAME:TAG] [--tokenizers=\"NAME...\"]" >&2
      exit 2
      ;;
  esac
done
if [ -z "$tag" ]; then
  tag="grammard:$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo dev)"
fi

log() { echo "build_image: $*" >&2; }

for tool in podman debootstrap runc; do
  if ! command -v "$tool" >/dev/null; then
    log "$tool not found: tools/setup.sh installs it (Debian package $tool)"
    exit 1
  fi
done
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/deploy/podman/containers.conf}

# The Debian mirror this machine's apt uses for a suite ("" if none).
mirror() {
  apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 'Created-By: Packages' |
    awk -v suite="$1" '$1 == suite { print $2; exit }'
}

# debian:bookworm and debian:bookworm-slim from one minbase debootstrap. The
# slim one, like Debian's official image, drops documentation, manual pages
# and translations, and tells dpkg to skip them in later installs; both keep
# no apt package lists or downloaded packages.
make_base_images() {
  local main rootfs
  main=$(mirror bookworm)
  if [ -z "$main" ]; then
    log "apt knows no mirror for bookworm (apt-get indextargets): cannot make the base image"
    return 1
  fi
  rootfs=$(mktemp -d /var/tmp/grammard-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$rootfs'" RETURN
  log "making debian:bookworm from $main (debootstrap, about a minute)"
  debootstrap --variant=minbase bookworm "$rootfs" "$main" >"$rootfs.log" 2>&1 || {
    tail -20 "$rootfs.log" >&2
    rm -f "$rootfs.log"
    log "debootstrap failed"
    return 1
  }
  rm -f "$rootfs.log"
  # The same suites as the host: updates and security fixes.
  local suite uri
  : >"$rootfs/etc/apt/sources.list"
  for suite in bookworm bookworm-updates bookworm-security; do
    uri=$(mirror "$suite")
    [ -z "$uri" ] || echo "deb $uri $suite main" >>"$rootfs/etc/apt/sources.list"
  done
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* \
    "$rootfs"/var/log/*.log "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
  local changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    --change 'CMD ["bash"]')
  tar --numeric-owner -C "$rootfs" -c . | podman import -q "${changes[@]}" - debian:bookworm >/dev/null
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/*
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias \
    -exec rm -rf {} +
  tar --numeric-owner -C "$rootfs" -c . | podman import -q "${changes[@]}" - debian:bookworm-slim >/dev/null
  log "made debian:bookworm and debian:bookworm-slim"
}

# One machine, one base: concurrent builds wait for the first to make it.
exec 9>/tmp/grammard-base-image.lock
flock --timeout 600 9 || { log "waited 10 min for another build's base image"; exit 1; }
if ! podman image exists debian:bookworm || ! podman image exists debian:bookworm-slim; then
  make_base_images
fi
flock --unlock 9

if [ -z "$binaries" ]; then
  log "building $tag from deploy/Dockerfile (both stages)"
  podman build -f "$repo/deploy/Dockerfile" --ignorefile "$repo/deploy/Dockerfile.dockerignore" \
    --build-arg TOKENIZERS="$tokenizers" -t "$tag" "$repo"
else
  # The runtime stage, verbatim, over a stand-in build stage holding the
  # host's binaries where the real one leaves its outputs (/out).
  context=$(mktemp -d /var/tmp/grammard-image.XXXXXX)
  trap 'rm -rf "$context"' EXIT
  for binary in service/grammard tools/grammarctl/grammarctl; do
    if [ ! -x "$binaries/$binary" ]; then
      log "no executable $binaries/$binary (bazel build -c opt //service:grammard //tools/grammarctl)"
      exit 1
    fi
    mkdir -p "$context/out/bazel-bin/$(dirname "$binary")"
    cp -L "$binaries/$binary" "$context/out/bazel-bin/$binary"
  done
  mkdir -p "$context/out/tokenizers"
  for t in $tokenizers; do
    cp -rL "$repo/.deps/tokenizers/$t" "$context/out/tokenizers/"
  done
  {
    echo "FROM scratch AS build"
    echo "COPY out/ /out/"
    awk '/^FROM /{ stage = "" } { stage = stage $0 "\n" } END { printf "%s", stage }' \
      "$repo/deploy/Dockerfile"
  } >"$context/Dockerfile"
  log "building $tag from deploy/Dockerfile's runtime stage and $binaries"
  podman build --layers=false -f "$context/Dockerfile" -t "$tag" "$context"
fi
size=$(podman image inspect --format '{{.Size}}' "$tag")
log "built $tag: $((size / 1000000)) MB"
echo "$tag"
