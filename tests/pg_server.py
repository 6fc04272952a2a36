"""A throw-away PostgreSQL server for the journal tests: Debian's ``postgresql`` binaries,
``initdb`` in a temporary directory owned by an unprivileged user (PostgreSQL refuses to run
as root, and CI is root), listening on a free loopback port only.

``PgServer`` starts, restarts and stops it; ``new_database()`` gives each test a database of
its own. Tests skip with the reason when the binaries or psycopg are missing."""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import List, Optional

SERVICE_USER = "gpuprovpg"
PASSWORD = "pw-" + uuid.uuid4().hex[:12]   # the journal user's; tests check it never shows


def _bin_dir() -> Optional[str]:
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return os.path.dirname(dirs[0]) if dirs else None


def unavailable() -> Optional[str]:
    """Why no server can be started here (None when one can)."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if _bin_dir() is None:
        return "the PostgreSQL server binaries are not installed (apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to drop to an unprivileged user"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _service_user() -> Optional[str]:
    """The unprivileged user the server runs as when we are root (made if missing)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                       check=True, capture_output=True)
    return SERVICE_USER


class PgServer:
    """One server: superuser ``postgres`` (trust on the socket), and a password-checked
    ``gpuprov`` user for journals over TCP."""

    def __init__(self, fsync: bool = False):
        self.bin = _bin_dir()
        self.user = _service_user()
        self.root = tempfile.mkdtemp(prefix="gpuprov-pg-")
        os.chmod(self.root, 0o755)
        self.data = os.path.join(self.root, "data")
        self.socket_dir = os.path.join(self.root, "run")
        self.log = os.path.join(self.root, "server.log")
        self.port = _free_port()
        os.makedirs(self.socket_dir)
        if self.user:
            info = pwd.getpwnam(self.user)
            for path in (self.root, self.socket_dir):
                os.chown(path, info.pw_uid, info.pw_gid)
        pwfile = os.path.join(self.root, "pw")
        with open(pwfile, "w", encoding="ascii") as handle:
            handle.write(PASSWORD)
        if self.user:
            os.chown(pwfile, pwd.getpwnam(self.user).pw_uid, -1)
        self._as_server(["initdb", "-D", self.data, "-U", "postgres", "--auth-local=trust",
                         "--auth-host=scram-sha-256", "--pwfile", pwfile, "-E", "UTF8", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a", encoding="ascii") as conf:
            conf.write("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"
                       "fsync = %s\nmax_connections = 200\n" % (self.port, self.socket_dir, "on" if fsync else "off"))
        self.start()
        self.admin("CREATE ROLE gpuprov LOGIN PASSWORD '%s'" % PASSWORD)

    def _as_server(self, argv: List[str], check: bool = True) -> subprocess.CompletedProcess:
        argv = [os.path.join(self.bin, argv[0])] + argv[1:]
        if self.user:
            argv = ["runuser", "-u", self.user, "--"] + argv
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=self.root)
        if check and proc.returncode != 0:
            raise RuntimeError("%s failed: %s%s" % (argv, proc.stdout, proc.stderr))
        return proc

    def start(self) -> None:
        self._as_server(["pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        self._as_server(["pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"], check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def admin(self, sql: str, database: str = "postgres") -> None:
        import psycopg  # pylint: disable=import-outside-toplevel
        with psycopg.connect(host=self.socket_dir, port=self.port, user="postgres", dbname=database,
                             autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self) -> str:
        """A fresh database owned by the journal user; its DSN (no password in it)."""
        name = "j_" + uuid.uuid4().hex[:12]
        self.admin("CREATE DATABASE %s OWNER gpuprov" % name)
        return self.dsn(name)

    def dsn(self, database: str, password: bool = False) -> str:
        secret = ":%s" % PASSWORD if password else ""
        return "postgresql://gpuprov%s@127.0.0.1:%d/%s" % (secret, self.port, database)


def database_name(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1].split("?", 1)[0]
