#!/usr/bin/env bash
# Run the molecule scenarios of this collection (docker driver) without Ansible Galaxy or an
# image registry: molecule and its docker plugin come from PyPI into build/molecule-venv, and the
# community.docker and ansible.posix collections are taken out of the `ansible` package's wheel
# (PyPI) into build/molecule-collections. The docker driver uses the locally built
# gpuprov/debian-base:bookworm image (scripts/build-base-image.sh).
#
#   bash extensions/molecule/run-offline.sh [scenario]      (default: k3s)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
VENV=build/molecule-venv
COLLS=build/molecule-collections
ANSIBLE_BUNDLE="${GPUPROV_ANSIBLE_BUNDLE:-ansible==12.3.0}"

if [[ ! -x $VENV/bin/molecule ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "ansible-core>=2.17,<2.20" molecule "molecule-plugins[docker]" docker
fi
if [[ ! -d $COLLS/ansible_collections/community/docker ]]; then
    mkdir -p build/molecule-dl
    "$VENV/bin/pip" download -q --no-deps "$ANSIBLE_BUNDLE" -d build/molecule-dl
    "$VENV/bin/python" - "$COLLS" build/molecule-dl/ansible-*.whl <<'PY'
import sys, zipfile
dest, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, members=[n for n in z.namelist()
                                if n.startswith(("ansible_collections/community/docker/",
                                                 "ansible_collections/ansible/posix/"))])
PY
fi
mkdir -p build/collections/ansible_collections/gpuprov
ln -sfn "$ROOT" build/collections/ansible_collections/gpuprov/cloud
bash scripts/build-base-image.sh
export ANSIBLE_COLLECTIONS_PATH="$ROOT/build/collections:$ROOT/$COLLS"
export PATH="$ROOT/$VENV/bin:$PATH"
exec molecule test -s "${1:-k3s}"
