# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files that hold keys, host keys, ssh config or kubeconfigs: written atomically,
0600 from the first byte, parent directories 0700; writers serialised with flock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from typing import Union


def write_private(path: str, data: Union[bytes, str]) -> bool:
    """Replace ``path`` atomically with ``data`` at mode 0600.

    Returns False (and writes nothing) when the file already holds exactly this
    content with mode 0600."""
    path = os.path.abspath(path)
    blob = data.encode() if isinstance(data, str) else data
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            same = handle.read() == blob
        if same and (os.stat(path).st_mode & 0o777) == 0o600:
            return False
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".gpuprov-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


@contextlib.contextmanager
def locked(path: str):
    """Hold an exclusive lock on ``<path>.lock`` (0600) for the duration."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    with os.fdopen(os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
