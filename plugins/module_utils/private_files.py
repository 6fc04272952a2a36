# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files that hold keys, host keys, ssh config or kubeconfigs: written atomically,
0600 from the first byte, directories created 0700 level by level whatever the
umask; writers serialised with flock. A file or directory that cannot be made is a
PrivateFileError naming it, never a bare OSError."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from typing import List, Union

# errno values that mean "this user may not write there", as opposed to a full disk or an I/O error.
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


class PrivateFileError(Exception):
    """A private file or directory cannot be created or written. ``path`` is the file or
    directory concerned; the message names it and says why."""

    def __init__(self, action: str, path: str, error: OSError):
        self.path = path
        self.errno = error.errno
        reason = error.strerror or str(error)
        if error.errno in _NOT_WRITABLE and action in ("create directory", "write", "lock", "remove"):
            reason += ("; %s is not writable by this user (fix its permissions or use another directory)"
                       % os.path.dirname(path))
        super().__init__("cannot %s %s: %s" % (action, path, reason))


def make_private_dirs(path: str, mode: int = 0o700) -> List[str]:
    """Create ``path`` and every missing parent, each one ``mode`` (chmod after mkdir, so
    the umask cannot widen or narrow it). Existing directories are left as they are.
    Returns the directories created, outermost first."""
    path = os.path.abspath(path)
    missing = []
    level = path
    while not os.path.isdir(level):
        missing.append(level)
        parent = os.path.dirname(level)
        if parent == level:
            break
        level = parent
    created = []
    for level in reversed(missing):
        try:
            os.mkdir(level, mode)
        except FileExistsError:
            if os.path.isdir(level):
                continue  # made by a concurrent run: theirs, keep its mode
            raise PrivateFileError("create directory", level, OSError(errno.ENOTDIR, "exists and is not a directory")) from None
        except OSError as exc:
            raise PrivateFileError("create directory", level, exc) from exc
        try:
            os.chmod(level, mode)
        except OSError as exc:
            raise PrivateFileError("set the mode of", level, exc) from exc
        created.append(level)
    return created


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
    make_private_dirs(parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".gpuprov-")
    except OSError as exc:
        raise PrivateFileError("write", path, exc) from exc
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise PrivateFileError("write", path, exc) from exc
        raise
    return True


def remove_private(path: str) -> bool:
    """Delete ``path`` if it exists; True when it did."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise PrivateFileError("remove", path, exc) from exc
    return True


@contextlib.contextmanager
def locked(path: str):
    """Hold an exclusive lock on ``<path>.lock`` (0600) for the duration."""
    make_private_dirs(os.path.dirname(os.path.abspath(path)))
    try:
        fd = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        raise PrivateFileError("lock", path, exc) from exc
    with os.fdopen(fd, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
