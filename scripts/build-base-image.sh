#!/usr/bin/env bash
# Build the Docker test cloud's base image offline: no registry is needed.
#
#   debootstrap --variant=minbase bookworm  ->  tar  ->  docker import  ->  gpuprov/debian-base:bookworm
#
# The docker adapter (plugins/module_utils/providers/docker.py) builds its sshd
# image FROM this tag (option base_image), so its own build step runs unchanged
# on a machine that cannot pull images.
#
# Fast when the image already exists (exits 0 at once). Installs debootstrap
# when it is missing (CI runs on a clean machine as root).
#
# Environment:
#   GPUPROV_BASE_IMAGE  tag to build            (default gpuprov/debian-base:bookworm)
#   GPUPROV_MIRROR      Debian mirror           (default: the one apt uses here)
#   GPUPROV_SUITE       Debian suite            (default bookworm)
#   GPUPROV_FORCE=1     rebuild even when the tag exists
set -euo pipefail

TAG="${GPUPROV_BASE_IMAGE:-gpuprov/debian-base:bookworm}"
SUITE="${GPUPROV_SUITE:-bookworm}"
PACKAGES="openssh-server,python3,ca-certificates,iproute2,procps"

log() { printf 'build-base-image: %s\n' "$*" >&2; }

if ! command -v docker >/dev/null 2>&1; then
    log "docker CLI not found; install Docker first"
    exit 1
fi
if ! docker info >/dev/null 2>&1; then
    log "the Docker engine does not answer (docker info failed); start dockerd or set DOCKER_HOST"
    exit 1
fi

exists() { [[ "${GPUPROV_FORCE:-0}" != "1" ]] && docker image inspect "$TAG" >/dev/null 2>&1; }
if exists; then
    log "$TAG already exists; nothing to do (GPUPROV_FORCE=1 rebuilds)"
    exit 0
fi

# One build at a time on this machine (parallel test sessions may all ask for it);
# whoever waited finds the image made by the first.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/gpuprov-build-base-image.lock"
    flock 9
    if exists; then
        log "$TAG was built meanwhile; nothing to do"
        exit 0
    fi
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        log "debootstrap needs root (run as root or install sudo)"
        exit 1
    fi
fi

# The mirror apt uses here: the first Debian archive (not -security) in
# sources.list or sources.list.d (one-line .list or deb822 .sources files).
find_mirror() {
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r "$f" ]] || continue
        uri="$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) {print $i; exit}}' "$f" \
               | grep -v -- '-security' | grep -i 'debian' | head -n1 || true)"
        if [[ -n "$uri" ]]; then printf '%s\n' "$uri"; return 0; fi
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r "$f" ]] || continue
        uri="$(awk 'tolower($1) == "uris:" {for (i = 2; i <= NF; i++) print $i}' "$f" \
               | grep -v -- '-security' | grep -i 'debian' | head -n1 || true)"
        if [[ -n "$uri" ]]; then printf '%s\n' "$uri"; return 0; fi
    done
    printf '%s\n' "http://deb.debian.org/debian"
}
MIRROR="${GPUPROV_MIRROR:-$(find_mirror)}"

if ! command -v debootstrap >/dev/null 2>&1 && [[ ! -x /usr/sbin/debootstrap ]]; then
    log "installing debootstrap"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q debootstrap
fi
DEBOOTSTRAP="$(command -v debootstrap || echo /usr/sbin/debootstrap)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-base.XXXXXX")"
cleanup() {
    # debootstrap may leave bind mounts (proc, sys) behind when it fails.
    local m
    awk -v root="$WORK/root" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r | while IFS= read -r m; do
        $SUDO umount -l "$m" </dev/null 2>/dev/null || true
    done
    $SUDO rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

start=$(date +%s)
log "debootstrap $SUITE from $MIRROR (packages: $PACKAGES)"
if ! $SUDO "$DEBOOTSTRAP" --variant=minbase --include="$PACKAGES" "$SUITE" "$WORK/root" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
    log "debootstrap failed; last lines of its log:"
    tail -n 30 "$WORK/debootstrap.log" >&2 || true
    if [[ -r "$WORK/root/debootstrap/debootstrap.log" ]]; then
        tail -n 30 "$WORK/root/debootstrap/debootstrap.log" >&2 || true
    fi
    exit 1
fi

# Slim the tree: package caches and lists are not needed in the image, and the
# host keys made by openssh-server's postinst must not be shared by every
# container (the sshd image's entrypoint generates one set per container).
$SUDO rm -rf "$WORK/root/var/cache/apt/archives/"*.deb "$WORK/root/var/lib/apt/lists/"* \
    "$WORK/root/debootstrap"
$SUDO rm -f "$WORK/root/etc/ssh/ssh_host_"*

log "importing the tree as $TAG"
$SUDO tar --numeric-owner -C "$WORK/root" -c . \
    | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' \
        --message "gpuprov base: debootstrap --variant=minbase $SUITE from $MIRROR" \
        - "$TAG" >/dev/null

log "built $TAG in $(( $(date +%s) - start )) s ($(docker image inspect -f '{{.Size}}' "$TAG") bytes)"
