#!/usr/bin/env bash
# Build the local base image (default tag skillopt-base:bookworm) from Debian packages alone:
# debootstrap a minbase rootfs, trim it, and `docker import` it. No container registry needed.
#
#   docker/base/bootstrap.sh [TAG]
#
# Environment:
#   SKILLOPT_DEBIAN_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   SKILLOPT_BUILD_DIR      scratch root (default docker/.build); the rootfs lives in a mktemp dir
#                           under it and is removed on exit; downloaded .debs are kept in
#                           <SKILLOPT_BUILD_DIR>/debootstrap-cache so a rebuild downloads little.
#
# The image carries the label org.skillopt.build-hash = sha256 of this file, which is what
# docker/build.sh compares to decide whether the base is up to date: edit this file (e.g. the
# package list) and the base is rebuilt; change only the mirror and it is not.
# Needs root (debootstrap chroots) and ~1 min on a fast mirror.
set -euo pipefail

die() { echo "bootstrap: error: $*" >&2; exit 1; }
log() { echo "bootstrap: $*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"
tag="${1:-skillopt-base:bookworm}"
suite=bookworm
mirror="${SKILLOPT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
build_root="${SKILLOPT_BUILD_DIR:-$here/../.build}"
# python3-venv: the service image builds its venv with it. tini is not needed (containers run
# with Docker's --init). The in-image python3-openpyxl / python3-pandas are what rollouts use.
# procps: ps/pkill for sandbox sessions (Inspect's self-check looks for leaked processes with ps).
packages=(python3 python3-openpyxl python3-pandas python3-venv ca-certificates procps)
build_hash="$(sha256sum "$self" | cut -c1-64)"

[[ ${EUID:-$(id -u)} -eq 0 ]] || die "debootstrap needs root: run as root or with sudo"
command -v debootstrap >/dev/null || die "debootstrap not installed: run scripts/setup.sh (or apt-get install debootstrap)"
command -v docker >/dev/null || die "docker CLI not found: run scripts/setup.sh"
docker info >/dev/null 2>&1 || die "docker engine not reachable: run scripts/setup.sh"

mkdir -p "$build_root"
build_root="$(cd "$build_root" && pwd)"  # debootstrap wants absolute paths
cache="$build_root/debootstrap-cache"
mkdir -p "$cache"
work="$(mktemp -d "$build_root/base-rootfs.XXXXXX")"
rootfs="$work/rootfs"

cleanup() {
  # debootstrap mounts proc/sys (and, when it thinks it runs inside a container, bind-mounts
  # host /dev nodes) into the target; an interrupted run can leave them mounted. Unmount
  # everything below $work, deepest first, before deleting, and never cross filesystems.
  local mnt
  while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done < <(awk -v w="$work" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

start=$SECONDS
log "debootstrap $suite (minbase + ${packages[*]}) from $mirror"
if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
    --cache-dir="$cache" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2
  [[ -f "$rootfs/debootstrap/debootstrap.log" ]] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (mirror $mirror; set SKILLOPT_DEBIAN_MIRROR to use another)"
fi
log "debootstrap done in $((SECONDS - start)) s; trimming"

# Package manifest: what exactly is in this base (kept in the image and next to the build).
dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f '${Package}\t${Version}\t${Architecture}\n' \
  | LC_ALL=C sort >"$work/packages.txt"
mkdir -p "$rootfs/etc/skillopt"
cp "$work/packages.txt" "$rootfs/etc/skillopt/base-packages.txt"
cp "$work/packages.txt" "$build_root/base-packages.txt"

# Keep it small: apt lists and caches, logs, docs (copyright files stay), man pages, message
# catalogs. The C.UTF-8 locale lives in /usr/lib/locale and is kept.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
  "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/archives/partial/* \
  "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
  "$rootfs"/usr/share/lintian "$rootfs"/usr/share/linda "$rootfs"/debootstrap
find "$rootfs/var/log" -type f -delete
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
# Same policy for anything installed later with apt (as Debian's own container images do).
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/skillopt-excludes" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
# Docker provides these at run time; do not bake the build host's values into the image.
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/etc/hostname"

log "importing as $tag"
# /dev, /proc and /sys are provided by the engine at run time: ship them empty.
image_id="$(tar --numeric-owner -C "$rootfs" \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . \
  | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --change "LABEL org.skillopt.image=base org.skillopt.build-hash=$build_hash org.skillopt.base.suite=$suite org.skillopt.base.source=debootstrap" \
    --message "skillopt base: debootstrap $suite minbase + ${packages[*]}" \
    - "$tag")"

docker run --rm --network none "$tag" python3 -c 'import openpyxl, pandas, venv' \
  || die "smoke test failed: python3 cannot import openpyxl/pandas/venv in $tag"
log "built $tag ($image_id) in $((SECONDS - start)) s"
