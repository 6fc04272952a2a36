#!/bin/sh
# gpuprov.cloud k3s installer: THE one installer, run at boot (the VM's boot script)
# or pushed over SSH by the gpuprov.cloud.k3s role. Idempotent; safe to run twice at
# once (host-wide flock); a run that changes nothing restarts nothing.
#
# Records its progress in /var/lib/gpuprov/k3s-install.status (key=value lines:
# state=running|done|failed, route, pid, started_at, updated_at, gpu, nvidia_runtime=present|
# installed|none, sans, manager, changed, source, k3s_version, error) and owns /etc/rancher/k3s/config.yaml,
# re-rendered from the SAN list on every run; k3s is restarted only when that file, the binary or the
# service definition changed.
#
# Where k3s comes from (first that is set):
#   GPUPROV_K3S_BINARY      a k3s binary already on this host (air-gapped: the role copies it here)
#   GPUPROV_K3S_AIRGAP_DIR  an air-gap bundle on this host (the role pushes k3s_airgap_bundle here):
#                           the binary (the release's k3s, k3s-arm64 or k3s-armhf for this host, as k3s's
#                           install.sh names them; or k3s), the images tarball k3s-airgap-images-<arch>.tar.zst
#                           (or .tar.gz, .tar) and, for GPUs, the NVIDIA device plugin image (a
#                           *device-plugin*.tar from docker save), all copied to /var/lib/rancher/k3s/agent/images,
#                           optionally toolkit/*.deb (the NVIDIA Container Toolkit's packages) and, for hosts
#                           with systemd or OpenRC, k3s's install script as install.sh. See docs/airgap.md.
#   GPUPROV_K3S_BINARY_URL  a URL of a k3s binary (air-gapped mirror); GPUPROV_K3S_BINARY_SHA256 checks it
#   otherwise               the official install script (GPUPROV_K3S_INSTALL_SCRIPT_URL, default
#                           https://get.k3s.io) and release (GPUPROV_K3S_VERSION, default: stable channel);
#                           without systemd or OpenRC, the release binary for this host's architecture
#                           (k3s${SUFFIX} and sha256sum-<arch>.txt, as install.sh downloads them)
# A binary that cannot run here (another architecture) or whose `--version` does not say
# "k3s version v<x>.<y>.<z>..." fails the install, naming the binary and what it printed.
# With systemd or OpenRC, a binary that did not come from the official script is installed as k3s's air-gap
# install does it: k3s's install script with INSTALL_K3S_SKIP_DOWNLOAD=true (its unit reads
# /etc/systemd/system/k3s.service.env, where k3s's docs put HTTP_PROXY; it adds k3s-killall.sh and
# k3s-uninstall.sh), from the bundle's install.sh, else GPUPROV_K3S_INSTALL_SCRIPT_URL.
# Other inputs:
#   GPUPROV_K3S_ROUTE        boot | ssh (recorded in the marker)
#   GPUPROV_K3S_SANS         extra API certificate SANs, comma or space separated
#   GPUPROV_K3S_METADATA     auto | off: add the public IPv4 from the EC2/GCE metadata service
#                            (auto asks only where the DMI data says EC2 or Google)
#   GPUPROV_K3S_GPU          auto | true | false: configure the NVIDIA runtime and device plugin. A GPU host
#                            without the NVIDIA Container Toolkit gets it (from the air-gap bundle's packages,
#                            else NVIDIA's apt repository), then k3s is restarted so it detects the nvidia
#                            runtime; when it cannot be installed the install fails, saying why. default-runtime
#                            (nvidia as every pod's runtime) needs k3s v1.29.0+k3s1 or later: older fails; a k3s
#                            that would not find the runtime where it is (see runtime_seen_by_k3s) fails too.
#                            false on a host that had the GPU path removes what it deployed: the device plugin
#                            manifest, its DaemonSet and AddOn, and the node label gpuprov.cloud/gpu (k3s
#                            deletes no object when its manifest goes, and never removes a node label).
#   GPUPROV_K3S_TOOLKIT_REPO NVIDIA's toolkit apt repository (default https://nvidia.github.io/libnvidia-container;
#                            a mirror with the same layout: gpgkey, stable/deb/nvidia-container-toolkit.list)
#   GPUPROV_K3S_DEVICE_PLUGIN_IMAGE  (default nvcr.io/nvidia/k8s-device-plugin:v0.20.0)
#   GPUPROV_K3S_PORT         API port (default 6443)
#   GPUPROV_K3S_NODE_NAME    node name (default: the hostname)
#   GPUPROV_K3S_EXTRA_CONFIG extra config.yaml lines, appended as they are
#   GPUPROV_K3S_LOCK_WAIT    seconds to wait for another installer (default 900)
#   GPUPROV_K3S_START_WAIT   seconds for a started k3s to write its kubeconfig and answer (default 120)
#
# Without systemd (containers), k3s is started with setsid/nohup and a pid file
# (/var/lib/gpuprov/k3s.pid, log /var/log/k3s.log); the marker's manager= says which.
set -eu
umask 022
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export PATH

STATE_DIR=/var/lib/gpuprov
STATUS="$STATE_DIR/k3s-install.status"
LOCK="$STATE_DIR/k3s-install.lock"
PIDFILE="$STATE_DIR/k3s.pid"
SOURCE_FILE="$STATE_DIR/k3s.source"
BIN=/usr/local/bin/k3s
CONFIG_DIR=/etc/rancher/k3s
CONFIG="$CONFIG_DIR/config.yaml"
KUBECONFIG_FILE="$CONFIG_DIR/k3s.yaml"
MANIFESTS=/var/lib/rancher/k3s/server/manifests
PLUGIN_MANIFEST="$MANIFESTS/gpuprov-nvidia-device-plugin.yaml"
# What the GPU path deploys through that manifest: k3s tracks the file as the AddOn named after its base
# name, and never deletes the objects (or the node label) when the file goes, so GPU off removes them.
PLUGIN_ADDON=gpuprov-nvidia-device-plugin
PLUGIN_DAEMONSET=nvidia-device-plugin-daemonset
GPU_LABEL=gpuprov.cloud/gpu
GPU_RECORD="$STATE_DIR/k3s-gpu.deployed"
CANDIDATE="$BIN.gpuprov-candidate"
UNIT=/etc/systemd/system/k3s.service
LOG=/var/log/k3s.log

ROUTE="${GPUPROV_K3S_ROUTE:-ssh}"
PORT="${GPUPROV_K3S_PORT:-6443}"
LOCK_WAIT="${GPUPROV_K3S_LOCK_WAIT:-900}"
START_WAIT="${GPUPROV_K3S_START_WAIT:-120}"
GPU_MODE="${GPUPROV_K3S_GPU:-auto}"
PLUGIN_IMAGE="${GPUPROV_K3S_DEVICE_PLUGIN_IMAGE:-nvcr.io/nvidia/k8s-device-plugin:v0.20.0}"
AIRGAP_DIR="${GPUPROV_K3S_AIRGAP_DIR:-}"
TOOLKIT_REPO="${GPUPROV_K3S_TOOLKIT_REPO:-https://nvidia.github.io/libnvidia-container}"
IMAGES_DIR=/var/lib/rancher/k3s/agent/images
TOOLKIT_KEYRING=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
TOOLKIT_APT_LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list

STARTED_AT=$(date +%s)
STEP="starting"
CHANGED=false
RESTART=false
GPU=false
NVIDIA_RUNTIME=none
MANAGER=none
SANS=""
SOURCE=""
K3S_RELEASE=""
WORK=""

say() { printf 'gpuprov-k3s-install: %s\n' "$*"; }

# --- the status marker (written atomically) -----------------------------------------
marker() {  # marker STATE [ERROR]
    tmp="$STATUS.tmp.$$"
    {
        echo "state=$1"
        echo "route=$ROUTE"
        echo "pid=$$"
        echo "started_at=$STARTED_AT"
        echo "updated_at=$(date +%s)"
        echo "gpu=$GPU"
        echo "nvidia_runtime=$NVIDIA_RUNTIME"
        echo "sans=$SANS"
        echo "manager=$MANAGER"
        echo "changed=$CHANGED"
        echo "source=$SOURCE"
        echo "k3s_version=$K3S_RELEASE"
        if [ -n "${2:-}" ]; then echo "error=$2"; fi
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$STATUS"
}

finish() {
    rc=$?
    if [ -n "$WORK" ]; then rm -rf "$WORK"; fi
    rm -f "$CANDIDATE"
    if [ "$rc" -ne 0 ]; then
        marker failed "$(printf '%s (exit %s)' "$STEP" "$rc" | tr '\n' ' ')"
        say "state=failed step=\"$STEP\" exit=$rc"
    fi
    exit "$rc"
}

fail() { STEP="$STEP: $*"; say "error: $*" >&2; exit 1; }

mkdir -p "$STATE_DIR"
chmod 0755 "$STATE_DIR"

# --- one installer at a time on this host ---------------------------------------------
command -v flock >/dev/null 2>&1 || { echo "gpuprov-k3s-install: flock (util-linux) is required" >&2; exit 1; }
exec 9>"$LOCK"
if ! flock -w "$LOCK_WAIT" 9; then
    echo "gpuprov-k3s-install: another installer held $LOCK for ${LOCK_WAIT}s" >&2
    exit 1
fi
trap finish EXIT
trap 'exit 130' INT TERM HUP
marker running
WORK=$(mktemp -d /tmp/gpuprov-k3s.XXXXXX)

# --- helpers ----------------------------------------------------------------------------
fetch() {  # fetch URL DEST
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 3 --connect-timeout 20 -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -T 20 -t 3 -O "$2" "$1"
    elif command -v python3 >/dev/null 2>&1; then
        python3 - "$1" "$2" <<'EOF'
import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], "wb") as f:
    shutil.copyfileobj(r, f)
EOF
    else
        fail "no curl, wget or python3 to download $1"
    fi
}

sha256() { sha256sum "$1" | cut -d' ' -f1; }

has_systemd() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

pid_alive() {  # the pid file names a live k3s process
    [ -s "$PIDFILE" ] || return 1
    pid=$(cat "$PIDFILE")
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'k3s'
}

started_alive() {  # started_alive PID: the k3s this run just started still lives.
    # Not pid_alive: until the child has exec'd k3s, its cmdline is still this installer's
    # (boot.sh at boot, which does not say k3s). A child that exited stays a zombie until
    # this shell reaps it, so a zombie counts as exited.
    [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

k3s_running() {
    if has_systemd; then systemctl is-active --quiet k3s; else pid_alive; fi
}

install_file() {  # install_file SRC DEST MODE: replace DEST only when different; sets CHANGED
    if [ -f "$2" ] && cmp -s "$1" "$2"; then
        return 1
    fi
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2.gpuprov-new"
    chmod "$3" "$2.gpuprov-new"
    mv -f "$2.gpuprov-new" "$2"
    CHANGED=true
    return 0
}

# --- GPU --------------------------------------------------------------------------------
STEP="detecting GPUs"
gpu_seen=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    gpu_seen=true
elif ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    gpu_seen=true
fi
case "$GPU_MODE" in
    true|yes|1|on) GPU=true ;;
    false|no|0|off) GPU=false ;;
    *) GPU=$gpu_seen ;;
esac

# --- this host's architecture, named as k3s's install.sh names it (setup_verify_arch) -------------
# k3s publishes the binary as k3s${SUFFIX} (amd64: k3s, arm64: k3s-arm64, arm: k3s-armhf, s390x: k3s-s390x),
# its checksums as sha256sum-<arch>.txt and its images as k3s-airgap-images-<arch>.tar[.zst|.gz].
MACHINE=$(uname -m)
ARCH_KNOWN=true
case "$MACHINE" in
    amd64|x86_64) ARCH=amd64; SUFFIX="" ;;
    arm64|aarch64) ARCH=arm64; SUFFIX=-arm64 ;;
    s390x) ARCH=s390x; SUFFIX=-s390x ;;
    arm*) ARCH=arm; SUFFIX=-armhf ;;
    *) ARCH=$MACHINE; SUFFIX=""; ARCH_KNOWN=false ;;
esac
RELEASE_BINARY="k3s$SUFFIX"

# --- the air-gap bundle -------------------------------------------------------------------
AIRGAP_IMAGES=""
if [ -n "$AIRGAP_DIR" ]; then
    STEP="checking the air-gap bundle $AIRGAP_DIR"
    [ -d "$AIRGAP_DIR" ] || fail "GPUPROV_K3S_AIRGAP_DIR: $AIRGAP_DIR is not a folder"
    for f in "$AIRGAP_DIR/k3s-airgap-images-$ARCH.tar.zst" "$AIRGAP_DIR/k3s-airgap-images-$ARCH.tar.gz" \
             "$AIRGAP_DIR/k3s-airgap-images-$ARCH.tar"; do
        if [ -f "$f" ]; then AIRGAP_IMAGES="$AIRGAP_IMAGES $f"; fi
    done
    [ -n "$AIRGAP_IMAGES" ] || fail "the air-gap bundle has no k3s-airgap-images-$ARCH.tar.zst (or .tar.gz, .tar)" \
        "for this $MACHINE host; without it pause and CoreDNS cannot start offline"
    plugin_images=""
    for f in "$AIRGAP_DIR"/*device-plugin*.tar "$AIRGAP_DIR"/*device-plugin*.tar.gz \
             "$AIRGAP_DIR"/*device-plugin*.tar.zst; do
        if [ -f "$f" ]; then plugin_images="$plugin_images $f"; fi
    done
    if [ "$GPU" = true ] && [ -z "$plugin_images" ]; then
        fail "the air-gap bundle has no NVIDIA device plugin image (a *device-plugin*.tar: docker save" \
            "$PLUGIN_IMAGE); without it the device plugin cannot start offline"
    fi
    AIRGAP_IMAGES="$AIRGAP_IMAGES $plugin_images"
    if [ -z "${GPUPROV_K3S_BINARY:-}" ]; then
        for f in "$AIRGAP_DIR/$RELEASE_BINARY" "$AIRGAP_DIR/k3s"; do
            if [ -f "$f" ]; then GPUPROV_K3S_BINARY=$f; break; fi
        done
        if [ -z "${GPUPROV_K3S_BINARY:-}" ]; then
            others=""
            for f in "$AIRGAP_DIR"/k3s-*; do
                case "${f##*/}" in
                    k3s-airgap-images*) ;;
                    *) if [ -e "$f" ]; then others="$others${f##*/} "; fi ;;
                esac
            done
            wanted=$RELEASE_BINARY
            [ "$RELEASE_BINARY" = k3s ] || wanted="$RELEASE_BINARY, as k3s publishes it, or k3s"
            have=""
            [ -z "$others" ] || have="; it has ${others% }, which k3s publishes for other architectures"
            fail "the air-gap bundle has no k3s binary for this $MACHINE host ($wanted)$have"
        fi
    fi
    if command -v ip >/dev/null 2>&1 && ! ip route show default 2>/dev/null | grep -q .; then
        say "warning: this host has no default route; k3s needs one to find the node's address (k3s's air-gap" \
            "docs: add a black-hole route via a dummy interface, see docs/airgap.md)"
    fi
fi

# --- GPU: the NVIDIA Container Toolkit (k3s detects its nvidia runtime when it starts) ------
toolkit_runtime() {  # the toolkit's runtime, where k3s looks for it
    for candidate in nvidia-container-runtime /usr/bin/nvidia-container-runtime \
                     /usr/local/nvidia/toolkit/nvidia-container-runtime; do
        if command -v "$candidate" >/dev/null 2>&1; then return 0; fi
    done
    return 1
}

apt_get() {  # apt-get, non-interactive, its output in $WORK/toolkit.log
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@" >"$WORK/toolkit.log" 2>&1
}

install_toolkit() {  # from the air-gap bundle's packages, else NVIDIA's apt repository
    if [ -n "$AIRGAP_DIR" ]; then
        STEP="installing the NVIDIA Container Toolkit from the air-gap bundle's packages ($AIRGAP_DIR/toolkit)"
        ls "$AIRGAP_DIR"/toolkit/*.deb >/dev/null 2>&1 \
            || fail "this VM has a GPU but no NVIDIA Container Toolkit, and the air-gap bundle has no" \
                "toolkit/*.deb to install it from"
        command -v dpkg >/dev/null 2>&1 || fail "the bundle's toolkit packages are .deb files but this host has no dpkg"
        if ! dpkg -i "$AIRGAP_DIR"/toolkit/*.deb >"$WORK/toolkit.log" 2>&1; then
            fail "dpkg -i of the bundle's toolkit packages failed: $(tail -n 3 "$WORK/toolkit.log" | tr '\n' ' ')"
        fi
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 \
        || fail "this VM has a GPU but no NVIDIA Container Toolkit, and no apt-get to install it from NVIDIA's" \
            "repository (use an image with nvidia-container-toolkit, or an air-gap bundle with its packages)"
    STEP="adding NVIDIA's toolkit apt repository $TOOLKIT_REPO"
    fetch "$TOOLKIT_REPO/gpgkey" "$WORK/toolkit.gpgkey" || fail "cannot download $TOOLKIT_REPO/gpgkey"
    fetch "$TOOLKIT_REPO/stable/deb/nvidia-container-toolkit.list" "$WORK/toolkit.list" \
        || fail "cannot download $TOOLKIT_REPO/stable/deb/nvidia-container-toolkit.list"
    mkdir -p "$(dirname "$TOOLKIT_KEYRING")"
    keyring=$TOOLKIT_KEYRING
    if command -v gpg >/dev/null 2>&1; then
        gpg --batch --yes --dearmor -o "$WORK/keyring" "$WORK/toolkit.gpgkey" \
            || fail "gpg --dearmor of $TOOLKIT_REPO/gpgkey failed"
    else
        keyring="${TOOLKIT_KEYRING%.gpg}.asc"   # apt reads armored keys named .asc
        cp "$WORK/toolkit.gpgkey" "$WORK/keyring"
    fi
    install_file "$WORK/keyring" "$keyring" 0644 || true
    sed "s#^deb \(https\{0,1\}://\)#deb [signed-by=$keyring] \1#" "$WORK/toolkit.list" >"$WORK/toolkit.sources"
    grep -q "^deb \[signed-by=" "$WORK/toolkit.sources" \
        || fail "$TOOLKIT_REPO/stable/deb/nvidia-container-toolkit.list has no deb line"
    install_file "$WORK/toolkit.sources" "$TOOLKIT_APT_LIST" 0644 || true
    STEP="installing nvidia-container-toolkit with apt-get"
    # First NVIDIA's list alone (an unrelated broken source cannot stop it; the toolkit's own dependencies
    # are on any Debian or Ubuntu image); when that cannot resolve, every source, as NVIDIA's guide does.
    # DPkg::Lock::Timeout: wait for a boot-time apt run (cloud-init's) to finish.
    if apt_get -o Dir::Etc::sourcelist="$TOOLKIT_APT_LIST" -o Dir::Etc::sourceparts=- \
            -o APT::Get::List-Cleanup=0 update && apt_get install -y nvidia-container-toolkit; then
        return 0
    fi
    apt_get update || fail "apt-get update failed: $(tail -n 3 "$WORK/toolkit.log" | tr '\n' ' ')"
    apt_get install -y nvidia-container-toolkit \
        || fail "apt-get install nvidia-container-toolkit failed: $(tail -n 3 "$WORK/toolkit.log" | tr '\n' ' ')"
}

runtime_seen_by_k3s() {  # the k3s release to be started finds the runtime where it is; else fail saying why
    STEP="checking that k3s $K3S_RELEASE finds the NVIDIA runtime"
    on_path=$(command -v nvidia-container-runtime 2>/dev/null || true)
    in_toolkit=""
    if [ -x /usr/local/nvidia/toolkit/nvidia-container-runtime ]; then
        in_toolkit=/usr/local/nvidia/toolkit/nvidia-container-runtime
    fi
    # Where k3s looks when it starts, by release (its pkg/agent/containerd runtime search):
    #   before v1.29.2+k3s1   /usr/local/nvidia/toolkit and /usr/bin only (fixed locations)
    #   from v1.29.2+k3s1     its PATH only (k3s #9311, exec.LookPath) ...
    #   ... until k3s #10761 (backported to v1.29.10+k3s1, v1.30.6+k3s1, v1.31.2+k3s1; in v1.32.0+k3s1)
    #                         puts /usr/local/nvidia/toolkit before its PATH
    search=both
    if [ "$K3S_MAJOR" -eq 1 ]; then
        case "$K3S_MINOR" in
            29) if [ "$K3S_PATCH" -lt 2 ]; then search=fixed; elif [ "$K3S_PATCH" -lt 10 ]; then search=path; fi ;;
            30) if [ "$K3S_PATCH" -lt 6 ]; then search=path; fi ;;
            31) if [ "$K3S_PATCH" -lt 2 ]; then search=path; fi ;;
        esac
    fi
    case "$search" in
        fixed)
            if [ -z "$in_toolkit" ] && [ ! -x /usr/bin/nvidia-container-runtime ]; then
                fail "k3s $K3S_RELEASE looks for nvidia-container-runtime only in /usr/local/nvidia/toolkit and" \
                    "/usr/bin (before k3s #9311, v1.29.2+k3s1); this host has it at ${on_path:-no known place}, so k3s" \
                    "would configure no nvidia runtime: set k3s_version to a later release"
            fi ;;
        path)
            if [ -z "$on_path" ]; then
                fail "k3s $K3S_RELEASE looks for nvidia-container-runtime only on its PATH (k3s #9311, from" \
                    "v1.29.2+k3s1, until the backport of k3s #10761 in v1.29.10+k3s1, v1.30.6+k3s1 and v1.31.2+k3s1);" \
                    "this host has it only in /usr/local/nvidia/toolkit, so k3s would configure no nvidia runtime:" \
                    "set k3s_version to a release with the backport, or install the runtime on PATH (the NVIDIA" \
                    "Container Toolkit's package puts it in /usr/bin)"
            fi ;;
    esac
}

if [ "$GPU" = true ]; then
    if toolkit_runtime; then
        NVIDIA_RUNTIME=present
    else
        say "GPU found but no nvidia-container-runtime: installing the NVIDIA Container Toolkit"
        install_toolkit
        toolkit_runtime || fail "the NVIDIA Container Toolkit was installed but no nvidia-container-runtime" \
            "is on PATH or in /usr/local/nvidia/toolkit"
        NVIDIA_RUNTIME=installed
        CHANGED=true
        RESTART=true   # k3s detects the nvidia runtime only when it starts
    fi
fi

# --- the SAN list -----------------------------------------------------------------------
STEP="collecting SANs"
sans_raw=$(printf '%s' "${GPUPROV_K3S_SANS:-}" | tr -s ', ' '\n')
metadata_mode="${GPUPROV_K3S_METADATA:-auto}"
if [ "$metadata_mode" != off ]; then
    vendor=$(cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name /sys/class/dmi/id/bios_vendor 2>/dev/null || true)
    public=""
    case "$vendor" in
        *Amazon*|*EC2*)
            if command -v python3 >/dev/null 2>&1; then
                public=$(python3 - <<'EOF' || true
import urllib.request
base = "http://169.254.169.254/latest/"
try:
    req = urllib.request.Request(base + "api/token", method="PUT",
                                 headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    token = urllib.request.urlopen(req, timeout=2).read().decode()
    req = urllib.request.Request(base + "meta-data/public-ipv4", headers={"X-aws-ec2-metadata-token": token})
    print(urllib.request.urlopen(req, timeout=2).read().decode().strip())
except Exception:
    pass
EOF
)
            fi ;;
        *Google*)
            if command -v python3 >/dev/null 2>&1; then
                public=$(python3 - <<'EOF' || true
import urllib.request
url = ("http://metadata.google.internal/computeMetadata/v1/instance/network-interfaces/0/"
       "access-configs/0/external-ip")
try:
    req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    print(urllib.request.urlopen(req, timeout=2).read().decode().strip())
except Exception:
    pass
EOF
)
            fi ;;
    esac
    if [ -n "$public" ]; then sans_raw=$(printf '%s\n%s' "$sans_raw" "$public"); fi
fi
SANS=$(printf '%s\n' "$sans_raw" | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)

# --- the binary -------------------------------------------------------------------------
shown() {  # what a command printed, on one line, quoted (or "nothing"), for an error message
    if [ -z "$1" ]; then
        printf 'nothing'
    else
        printf "'%s'" "$(printf '%s' "$1" | tr '\n' ' ' | sed 's/ *$//' | cut -c1-240)"
    fi
}

check_binary() {  # check_binary FILE NAME: FILE runs here and says which k3s it is (sets K3S_RELEASE)
    STEP="checking the k3s binary $2"
    out=$("$1" --version 2>&1) && rc=0 || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "the k3s binary $2 cannot run on this $MACHINE host: '--version' exited $rc and printed $(shown "$out")" \
            "(a binary for another architecture? k3s publishes this host's as $RELEASE_BINARY)"
    fi
    line=$(printf '%s\n' "$out" | head -n 1)
    K3S_RELEASE=$(printf '%s\n' "$line" \
        | sed -n 's/^k3s version \(v[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*[^ ]*\).*$/\1/p')
    if [ -z "$K3S_RELEASE" ]; then
        fail "cannot read the version of the k3s binary $2: '--version' printed $(shown "$line")," \
            "not 'k3s version v<major>.<minor>.<patch>+k3s<n> (<commit>)'"
    fi
}

stage_binary() {  # stage_binary FILE NAME: check a copy of FILE next to $BIN, then make it $BIN
    if [ -x "$BIN" ] && cmp -s "$1" "$BIN"; then
        check_binary "$BIN" "$2"
        return 0
    fi
    mkdir -p "$(dirname "$BIN")"
    cp "$1" "$CANDIDATE"
    chmod 0755 "$CANDIDATE"
    check_binary "$CANDIDATE" "$2"
    mv -f "$CANDIDATE" "$BIN"
    CHANGED=true
    RESTART=true
}

recorded=$(cat "$SOURCE_FILE" 2>/dev/null || true)
if [ -n "${GPUPROV_K3S_BINARY:-}" ]; then
    STEP="installing k3s from $GPUPROV_K3S_BINARY"
    [ -f "$GPUPROV_K3S_BINARY" ] || fail "GPUPROV_K3S_BINARY: $GPUPROV_K3S_BINARY does not exist"
    SOURCE="file:$(sha256 "$GPUPROV_K3S_BINARY")"
    stage_binary "$GPUPROV_K3S_BINARY" "$GPUPROV_K3S_BINARY"
elif [ -n "${GPUPROV_K3S_BINARY_URL:-}" ]; then
    STEP="installing k3s from $GPUPROV_K3S_BINARY_URL"
    SOURCE="url:$GPUPROV_K3S_BINARY_URL"
    if [ "$recorded" = "$SOURCE $(sha256 "$BIN" 2>/dev/null || true)" ] && [ -x "$BIN" ]; then
        check_binary "$BIN" "$BIN (from $GPUPROV_K3S_BINARY_URL)"   # installed and unchanged since
    else
        fetch "$GPUPROV_K3S_BINARY_URL" "$WORK/k3s"
        if [ -n "${GPUPROV_K3S_BINARY_SHA256:-}" ] && [ "$(sha256 "$WORK/k3s")" != "$GPUPROV_K3S_BINARY_SHA256" ]; then
            fail "the binary from $GPUPROV_K3S_BINARY_URL does not match GPUPROV_K3S_BINARY_SHA256"
        fi
        stage_binary "$WORK/k3s" "$GPUPROV_K3S_BINARY_URL"
    fi
else
    STEP="installing k3s with the official install script"
    SOURCE="official:${GPUPROV_K3S_VERSION:-stable}"
    if [ -x "$BIN" ] && [ "${recorded%% *}" = "$SOURCE" ]; then
        check_binary "$BIN" "$BIN"
    elif has_systemd || [ -x /sbin/openrc-run ]; then
        fetch "${GPUPROV_K3S_INSTALL_SCRIPT_URL:-https://get.k3s.io}" "$WORK/get-k3s.sh"
        # The script installs the binary and the service; this installer starts it below.
        INSTALL_K3S_SKIP_START=true INSTALL_K3S_SKIP_ENABLE=true INSTALL_K3S_VERSION="${GPUPROV_K3S_VERSION:-}" \
            sh "$WORK/get-k3s.sh" server
        CHANGED=true
        RESTART=true
        check_binary "$BIN" "$BIN (installed by ${GPUPROV_K3S_INSTALL_SCRIPT_URL:-https://get.k3s.io})"
    else
        # No process supervisor the script knows: fetch the release binary for this architecture
        # and its checksum, as the script's download_and_verify does.
        [ "$ARCH_KNOWN" = true ] || fail "k3s publishes no release binary for this $MACHINE host (its install.sh" \
            "knows amd64, arm64, arm and s390x): set k3s_binary_src, k3s_binary_url or k3s_airgap_bundle"
        version="${GPUPROV_K3S_VERSION:-}"
        if [ -z "$version" ]; then
            STEP="finding the stable k3s release"
            python3 - >"$WORK/version" <<'EOF'
import urllib.request
url = urllib.request.urlopen("https://update.k3s.io/v1-release/channels/stable", timeout=30).geturl()
print(url.rstrip("/").rsplit("/", 1)[-1])
EOF
            version=$(cat "$WORK/version")
        fi
        base="https://github.com/k3s-io/k3s/releases/download/$(printf '%s' "$version" | sed 's/+/%2B/g')"
        STEP="downloading k3s $version for $ARCH ($base/$RELEASE_BINARY)"
        fetch "$base/sha256sum-$ARCH.txt" "$WORK/sha256sum.txt" || fail "cannot download $base/sha256sum-$ARCH.txt"
        expected=$(sed -n "s/^\([0-9a-f]\{64\}\)[[:blank:]][[:blank:]]*[*]\{0,1\}$RELEASE_BINARY\$/\1/p" \
            "$WORK/sha256sum.txt" | head -n 1)
        [ -n "$expected" ] || fail "$base/sha256sum-$ARCH.txt lists no $RELEASE_BINARY"
        fetch "$base/$RELEASE_BINARY" "$WORK/k3s" || fail "cannot download $base/$RELEASE_BINARY"
        [ "$(sha256 "$WORK/k3s")" = "$expected" ] \
            || fail "$base/$RELEASE_BINARY does not match its checksum in sha256sum-$ARCH.txt"
        stage_binary "$WORK/k3s" "$base/$RELEASE_BINARY"
    fi
fi
[ -x "$BIN" ] || fail "$BIN is missing after the install"
release_numbers=$(printf '%s\n' "$K3S_RELEASE" | sed -n 's/^v\([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p')
K3S_MAJOR=${release_numbers%% *}
K3S_PATCH=${release_numbers##* }
K3S_MINOR=${release_numbers#* }
K3S_MINOR=${K3S_MINOR%% *}
if [ "$GPU" = true ]; then
    # v1.29.0+k3s1's release notes add default-runtime (k3s #8936) and allow it on servers (#9027);
    # backports to older lines are not relied on.
    STEP="checking the k3s version takes default-runtime"
    if [ "$K3S_MAJOR" -eq 1 ] && [ "$K3S_MINOR" -lt 29 ]; then
        fail "k3s version $K3S_RELEASE is older than v1.29.0+k3s1, whose release notes add default-runtime on" \
            "servers, which GPU VMs need (set k3s_version)"
    fi
    runtime_seen_by_k3s
fi
echo "$SOURCE $(sha256 "$BIN")" >"$SOURCE_FILE.new" && mv -f "$SOURCE_FILE.new" "$SOURCE_FILE"

# --- air-gap images: k3s imports every tarball in agent/images when it starts ------------
if [ -n "$AIRGAP_IMAGES" ]; then
    STEP="placing the air-gap images in $IMAGES_DIR"
    mkdir -p "$IMAGES_DIR"
    for f in $AIRGAP_IMAGES; do
        if install_file "$f" "$IMAGES_DIR/$(basename "$f")" 0644; then RESTART=true; fi
    done
fi

# --- config.yaml, rendered from the SAN list --------------------------------------------
STEP="rendering $CONFIG"
{
    echo "# Written by the gpuprov.cloud k3s installer on every run: edits here are replaced."
    echo "write-kubeconfig-mode: \"0600\""
    echo "https-listen-port: $PORT"
    if [ -n "${GPUPROV_K3S_NODE_NAME:-}" ]; then echo "node-name: \"$GPUPROV_K3S_NODE_NAME\""; fi
    if [ -n "$SANS" ]; then
        echo "tls-san:"
        printf '%s\n' "$SANS" | tr ',' '\n' | sed 's/^\(.*\)$/  - "\1"/'
    fi
    if [ "$GPU" = true ]; then
        echo "default-runtime: nvidia"
        echo "node-label:"
        echo "  - \"$GPU_LABEL=true\""
    fi
    if [ -n "${GPUPROV_K3S_EXTRA_CONFIG:-}" ]; then printf '%s\n' "$GPUPROV_K3S_EXTRA_CONFIG"; fi
} >"$WORK/config.yaml"
if install_file "$WORK/config.yaml" "$CONFIG" 0600; then RESTART=true; fi

# --- GPU: the NVIDIA device plugin, deployed by k3s from its manifests folder -------------
# NVIDIA's static manifest (deployments/static/nvidia-device-plugin.yml of the release), on GPU nodes only.
if [ "$GPU" = true ]; then
    STEP="writing the NVIDIA device plugin manifest"
    cat >"$WORK/plugin.yaml" <<EOF
# Written by the gpuprov.cloud k3s installer: the NVIDIA device plugin, so pods can request nvidia.com/gpu.
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: $PLUGIN_DAEMONSET
  namespace: kube-system
spec:
  selector:
    matchLabels:
      name: nvidia-device-plugin-ds
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        name: nvidia-device-plugin-ds
    spec:
      nodeSelector:
        $GPU_LABEL: "true"
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      priorityClassName: system-node-critical
      containers:
        - name: nvidia-device-plugin-ctr
          image: $PLUGIN_IMAGE
          imagePullPolicy: IfNotPresent
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: kubelet-device-plugins-dir
              mountPath: /var/lib/kubelet/device-plugins
      volumes:
        - name: kubelet-device-plugins-dir
          hostPath:
            path: /var/lib/kubelet/device-plugins
            type: Directory
EOF
    # Recorded first: GPU off must know to remove what k3s made from the manifest.
    [ -f "$GPU_RECORD" ] || echo "addon=$PLUGIN_ADDON daemonset=kube-system/$PLUGIN_DAEMONSET label=$GPU_LABEL" >"$GPU_RECORD"
    install_file "$WORK/plugin.yaml" "$PLUGIN_MANIFEST" 0644 || true
elif [ -f "$PLUGIN_MANIFEST" ]; then
    STEP="removing the NVIDIA device plugin manifest (GPU off)"
    [ -f "$GPU_RECORD" ] || echo "addon=$PLUGIN_ADDON daemonset=kube-system/$PLUGIN_DAEMONSET label=$GPU_LABEL" >"$GPU_RECORD"
    rm -f "$PLUGIN_MANIFEST"
    CHANGED=true
fi

# --- k3s's install script for the air-gap install (systemd or OpenRC hosts) ---------------
INSTALL_SCRIPT_FROM=""
airgap_install_script() {  # $WORK/install.sh: the bundle's install.sh, else GPUPROV_K3S_INSTALL_SCRIPT_URL
    script_url="${GPUPROV_K3S_INSTALL_SCRIPT_URL:-https://get.k3s.io}"
    if [ -n "$AIRGAP_DIR" ] && [ -f "$AIRGAP_DIR/install.sh" ]; then
        INSTALL_SCRIPT_FROM="$AIRGAP_DIR/install.sh"
        cp "$AIRGAP_DIR/install.sh" "$WORK/install.sh"
    elif fetch "$script_url" "$WORK/install.sh" 2>"$WORK/fetch.log"; then
        INSTALL_SCRIPT_FROM="$script_url"
    else
        fail "k3s's air-gap install runs k3s's install script with INSTALL_K3S_SKIP_DOWNLOAD=true, and this host" \
            "has none: ${AIRGAP_DIR:+the air-gap bundle has no install.sh and }$script_url cannot be downloaded" \
            "(put https://get.k3s.io in the bundle as install.sh, or set k3s_install_script_url to a copy this VM" \
            "can reach)"
    fi
}

# --- run k3s: systemd where it is PID 1, a pid file elsewhere ---------------------------
if has_systemd; then
    MANAGER=systemd
    STEP="starting k3s with systemd"
    # The unit earlier installers wrote themselves (no EnvironmentFile, no killall/uninstall scripts) is replaced.
    if { [ ! -f "$UNIT" ] && [ ! -f /usr/lib/systemd/system/k3s.service ] && [ ! -f /lib/systemd/system/k3s.service ]; } \
            || grep -q '^Description=.*(installed by gpuprov.cloud)' "$UNIT" 2>/dev/null; then
        # k3s's air-gap install: its install script with the binary in place (INSTALL_K3S_SKIP_DOWNLOAD=true)
        # writes k3s's own unit (EnvironmentFile=-/etc/systemd/system/k3s.service.env, where K3S_* and
        # HTTP_PROXY/HTTPS_PROXY/NO_PROXY from this environment go), k3s-killall.sh and k3s-uninstall.sh.
        STEP="installing k3s's service with its install script (INSTALL_K3S_SKIP_DOWNLOAD=true)"
        airgap_install_script
        INSTALL_K3S_SKIP_DOWNLOAD=true INSTALL_K3S_SKIP_START=true INSTALL_K3S_SKIP_ENABLE=true \
            INSTALL_K3S_BIN_DIR="$(dirname "$BIN")" sh "$WORK/install.sh" server >"$WORK/install.log" 2>&1 \
            || fail "k3s's install script ($INSTALL_SCRIPT_FROM) failed: $(tail -n 3 "$WORK/install.log" | tr '\n' ' ')"
        [ -f "$UNIT" ] || fail "k3s's install script ($INSTALL_SCRIPT_FROM) wrote no $UNIT"
        systemctl daemon-reload
        CHANGED=true
        RESTART=true
    fi
    if ! systemctl is-enabled --quiet k3s 2>/dev/null; then systemctl enable k3s >/dev/null 2>&1; CHANGED=true; fi
    if [ "$RESTART" = true ] && systemctl is-active --quiet k3s; then
        systemctl restart k3s
        CHANGED=true
    elif ! systemctl is-active --quiet k3s; then
        systemctl start k3s
        CHANGED=true
    fi
else
    MANAGER=pidfile
    STEP="starting k3s without systemd (pid file $PIDFILE)"
    if [ "$RESTART" = true ] && pid_alive; then
        pid=$(cat "$PIDFILE")
        say "restarting k3s (pid $pid): its binary or configuration changed"
        kill "$pid" 2>/dev/null || true
        waited=0
        while [ -d "/proc/$pid" ] && [ "$waited" -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
        if [ -d "/proc/$pid" ]; then kill -9 "$pid" 2>/dev/null || true; sleep 1; fi
        rm -f "$PIDFILE"
    fi
    if ! pid_alive; then
        rm -f "$KUBECONFIG_FILE"
        # Detached from this shell and session (and without the lock's fd 9): k3s outlives
        # the SSH login or boot runner and never holds the installer lock.
        if command -v setsid >/dev/null 2>&1; then
            setsid nohup "$BIN" server --config "$CONFIG" >>"$LOG" 2>&1 </dev/null 9>&- &
        else
            nohup "$BIN" server --config "$CONFIG" >>"$LOG" 2>&1 </dev/null 9>&- &
        fi
        started=$!
        echo "$started" >"$PIDFILE"
        CHANGED=true
        STEP="waiting for the started k3s to write $KUBECONFIG_FILE"
        waited=0
        while [ ! -s "$KUBECONFIG_FILE" ]; do
            started_alive "$started" || fail "k3s exited at start; last lines of $LOG: $(tail -n 5 "$LOG" | tr '\n' ' ')"
            [ "$waited" -lt "$START_WAIT" ] || fail "k3s wrote no kubeconfig within ${START_WAIT}s"
            sleep 1
            waited=$((waited + 1))
        done
    fi
fi
if [ "$MANAGER" = systemd ]; then
    STEP="waiting for k3s to write $KUBECONFIG_FILE"
    waited=0
    while [ ! -s "$KUBECONFIG_FILE" ]; do
        [ "$waited" -lt "$START_WAIT" ] || fail "k3s wrote no kubeconfig within ${START_WAIT}s"
        sleep 1
        waited=$((waited + 1))
    done
fi

# --- GPU off: remove what the GPU path deployed -------------------------------------------
# k3s deletes no object when its manifest is removed (Managing Packaged Components) and only ever adds
# the config's node labels (updateMutableLabels), so the device plugin's DaemonSet, its AddOn and the
# node label stay unless removed here. The record says there is something to remove: a run with nothing
# to remove asks the API nothing.
kubectl_k3s() { KUBECONFIG="$KUBECONFIG_FILE" "$BIN" kubectl "$@"; }

remove_gpu_objects() {
    STEP="waiting for the k3s API to remove the NVIDIA device plugin (GPU off)"
    waited=0
    until kubectl_k3s get nodes -o name >"$WORK/kubectl.log" 2>&1; do
        [ "$waited" -lt "$START_WAIT" ] || fail "the k3s API did not answer within ${START_WAIT}s:" \
            "$(tail -n 2 "$WORK/kubectl.log" | tr '\n' ' ')"
        sleep 1
        waited=$((waited + 1))
    done
    removed=""
    for object in "daemonset $PLUGIN_DAEMONSET" "addon $PLUGIN_ADDON"; do
        kind=${object%% *}
        name=${object#* }
        STEP="removing the $kind kube-system/$name (GPU off)"
        found=$(kubectl_k3s get "$kind" "$name" -n kube-system -o name --ignore-not-found 2>"$WORK/kubectl.log") \
            || fail "kubectl get $kind $name failed: $(tail -n 2 "$WORK/kubectl.log" | tr '\n' ' ')"
        if [ -n "$found" ]; then
            kubectl_k3s delete "$kind" "$name" -n kube-system --ignore-not-found >/dev/null 2>"$WORK/kubectl.log" \
                || fail "kubectl delete $kind $name failed: $(tail -n 2 "$WORK/kubectl.log" | tr '\n' ' ')"
            removed="$removed $found"
        fi
    done
    STEP="removing the node label $GPU_LABEL (GPU off)"
    nodes=$(kubectl_k3s get nodes -l "$GPU_LABEL" -o name 2>"$WORK/kubectl.log") \
        || fail "kubectl get nodes -l $GPU_LABEL failed: $(tail -n 2 "$WORK/kubectl.log" | tr '\n' ' ')"
    for node in $nodes; do
        kubectl_k3s label "$node" "$GPU_LABEL-" >/dev/null 2>"$WORK/kubectl.log" \
            || fail "kubectl label $node $GPU_LABEL- failed: $(tail -n 2 "$WORK/kubectl.log" | tr '\n' ' ')"
        removed="$removed $node:$GPU_LABEL"
    done
    if [ -n "$removed" ]; then
        CHANGED=true
        say "GPU off: removed$removed"
    fi
    rm -f "$GPU_RECORD"
}

if [ "$GPU" != true ] && [ -f "$GPU_RECORD" ]; then
    remove_gpu_objects
fi

STEP="done"
marker "done"
say "state=done changed=$CHANGED route=$ROUTE manager=$MANAGER gpu=$GPU sans=$SANS"
