"""No secret the user passes shows anywhere, at -vvv: every playbook and every module of the collection
runs with its journal on PostgreSQL (a throw-away server, tests/pg_server.py), the password inline in the
DSN (``postgresql://gpuprov:PW@...``) or as ``journal_password``, and with cloud API keys (lambda's in
``cloud_options``, runpod's in its environment variable) sent to a fake API that echoes them back in its
errors, as some vendors do. Neither the password nor a key may appear in the output, in the journal's
tables, or in any file the runs wrote (their HOME, state directory, temporary and control directories).
The DSN itself does show, its password masked: ``postgresql://gpuprov:********@...``."""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import shutil
import socket
import textwrap
import threading
import uuid
from typing import Iterator, List, Tuple

import pytest

from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible, Run, kill_sshds

LAMBDA_KEY = "lambda-key-" + uuid.uuid4().hex      # given in cloud_options.lambda.api_key
RUNPOD_KEY = "runpod-key-" + uuid.uuid4().hex      # given only as RUNPOD_API_KEY
WRONG_PASSWORD = "wrong-pw-" + uuid.uuid4().hex    # a DSN's password the server refuses
MASKED_DSN = "postgresql://gpuprov:********@"


class _EchoApi(http.server.BaseHTTPRequestHandler):
    """A cloud API that refuses every request, quoting the credential it was sent."""

    seen: List[str] = []

    def _refuse(self):
        auth = self.headers.get("Authorization", "") + self.headers.get("api_key", "")
        self.seen.append(auth)
        body = json.dumps({"error": {"code": "global/invalid-api-key", "message": "invalid API key: %s" % auth},
                           "errors": ["invalid API key: %s" % auth]}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def log_message(self, *args):   # quiet
        pass


@pytest.fixture
def echo_api() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoApi)
    _EchoApi.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class Job:
    """One controller: a HOME, state directory, temporary and control directories of its own (all
    walked for the secrets afterwards), and an ``inputs`` folder for what the user writes (the
    playbooks, an inventory file, an extra-vars file), which is not walked."""

    def __init__(self, tmp_path: pathlib.Path, postgres, api: str):
        self.root = tmp_path / "written"
        self.inputs = tmp_path / "inputs"
        self.inputs.mkdir()
        for name in ("home", "gpuprov", "tmp", "shared"):
            (self.root / name).mkdir(parents=True, mode=0o700)
        self.postgres = postgres
        self.dsn = postgres.new_database()                       # no password in it
        self.database = self.dsn.rsplit("/", 1)[1]
        self.dsn_pw = postgres.dsn(self.database, password=True)  # the password inline
        self.ansible = Ansible(self.root / "gpuprov")
        env = self.ansible.env
        for name in ("PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "LAMBDA_API_KEY", "RUNPOD_API_KEY"):
            env.pop(name, None)
        env.update(HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"), RUNPOD_API_KEY=RUNPOD_KEY)
        self.cloud_options = {"local": {"root": str(self.root / "shared" / "local")},
                              "lambda": {"api_url": api + "/api/v1", "api_key": LAMBDA_KEY,
                                         "allowed_cidrs": ["10.0.0.0/8"]},
                              "runpod": {"api_url": api + "/v2"}}
        self.runs: List[Tuple[str, Run]] = []

    def playbook(self, name: str, *args: str, verbosity: str = "-vvv") -> Run:
        run = self.ansible.playbook(name, verbosity, *args)
        self.runs.append((name, run))
        return run

    def tool(self, program: str, *args: str) -> Run:
        run = self.ansible.tool(program, "-vvv", *args)
        run.out = run.out + run.err
        self.runs.append((program, run))
        return run

    def common(self) -> List[str]:
        return ["-e", "gpuprov_journal=%s" % self.dsn_pw,
                "-e", json.dumps({"gpuprov_cloud_options": self.cloud_options})]

    def written(self) -> Iterator[pathlib.Path]:
        for top in (self.root, pathlib.Path(self.ansible.control_dir)):
            for folder, _dirs, files in os.walk(top):
                for name in files:
                    yield pathlib.Path(folder) / name
        yield pathlib.Path(self.postgres.log)

    def journal_text(self) -> str:
        """Every row of every table of the journal's database, as text."""
        import psycopg  # pylint: disable=import-outside-toplevel
        rows = []
        with psycopg.connect(host=self.postgres.socket_dir, port=self.postgres.port, user="postgres",
                             dbname=self.database, autocommit=True) as conn:
            tables = [t for (t,) in conn.execute("SELECT table_name FROM information_schema.tables "
                                                 "WHERE table_schema = current_schema()")]
            for table in tables:
                rows.extend("%s %r" % (table, row) for row in conn.execute('SELECT * FROM "%s"' % table))
        assert "machines" in tables and rows, tables
        return "\n".join(rows)

    def assert_nothing_shows(self) -> None:
        from ansible_collections.gpuprov.cloud.tests import pg_server
        secrets = {"the journal password": pg_server.PASSWORD, "the lambda API key": LAMBDA_KEY,
                   "the runpod API key": RUNPOD_KEY, "a wrong journal password": WRONG_PASSWORD}
        leaks = []
        for what, secret in secrets.items():
            leaks.extend("%s in the output of %s" % (what, name) for name, run in self.runs if secret in run.out)
            if secret in self.journal_text():
                leaks.append("%s in the journal" % what)
        for path in self.written():
            try:
                data = path.read_bytes()
            except OSError:
                continue   # a socket, or gone since it was listed
            leaks.extend("%s in %s" % (what, path) for what, secret in secrets.items() if secret.encode() in data)
        assert not leaks, "\n".join(leaks) + "\n\n" + "\n".join("%s: %r" % (n, r) for n, r in self.runs
                                                                if any(s in r.out for s in secrets.values()))

    def close(self) -> None:
        kill_sshds(self.root / "shared")
        kill_sshds(self.ansible.home)
        shutil.rmtree(self.ansible.control_dir, ignore_errors=True)


@pytest.fixture
def job(tmp_path, postgres, echo_api) -> Iterator[Job]:
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    found = Job(tmp_path, postgres, echo_api)
    try:
        yield found
    finally:
        found.close()


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def test_every_playbook_at_vvv_shows_no_password_and_no_api_key(job: Job):
    clouds = ["-e", "clouds=lambda,runpod,local"]
    run = job.playbook("provision", "-e", "vm=sv1", "-e", "k8s=false", *clouds, *job.common())
    assert run.rc == 0, run
    status = job.playbook("status", "-e", "orphans=true", *clouds, *job.common())
    assert status.rc == 0, status
    # The highest verbosity prints the command line's extra vars: the secrets come from a file there.
    secrets = job.inputs / "secrets.json"
    secrets.write_text(json.dumps({"gpuprov_journal": job.dsn_pw, "gpuprov_cloud_options": job.cloud_options}))
    status_at_6 = job.playbook("status", "-e", "@%s" % secrets, verbosity="-vvvvvv")
    assert status_at_6.rc == 0, status_at_6
    run = job.playbook("health", "-e", "vm=sv1", *clouds, *job.common())
    assert "sv1" in run.out, run
    # The tunnel forwards a k3s cluster's API: sv1 (no k3s on the local cloud) is said to be one, as the k3s role
    # says it, by an ad-hoc task.
    run = job.tool("ansible", "localhost", "-m", "gpuprov.cloud.vm_stage", "-a",
                   json.dumps({"name": "sv1", "stage": "Ready", "journal": job.dsn_pw}))
    assert run.rc == 0, run
    with _busy_port() as busy:
        # The forward cannot bind its local port: ssh logs in, then gives up, and the play ends.
        run = job.playbook("tunnel", "-e", "vm=sv1", "-e", "local_port=%d" % busy.getsockname()[1], *job.common())
    assert "Could not request local forwarding" in run.out, run
    for delete in ("false", "true"):
        run = job.playbook("sweep", "-e", "delete=%s" % delete, *clouds, *job.common())
        assert run.rc == 0 and "orphan(s) costing" in run.out, run
    from ansible_collections.gpuprov.cloud.tests import pg_server
    inline, option = job.inputs / "inline.gpuprov_journal.yml", job.inputs / "option.gpuprov_journal.yml"
    inline.write_text("plugin: gpuprov.cloud.journal\njournal: %s\n" % job.dsn_pw)
    option.write_text("plugin: gpuprov.cloud.journal\njournal: %s\njournal_password: %s\n"
                      % (job.dsn, pg_server.PASSWORD))
    run = job.tool("ansible-inventory", "-i", str(inline), "-i", str(option), "--list")
    assert run.rc == 0 and "sv1" in run.out, run
    run = job.playbook("down", "-e", "vm=sv1", *job.common())
    assert run.rc == 0, run
    _assert_both_keys_were_sent()
    job.assert_nothing_shows()
    # The journal does show (the status task's invocation), its password masked.
    assert MASKED_DSN in status.out and MASKED_DSN in status_at_6.out, status


def _assert_both_keys_were_sent():
    """Both clouds were asked with their keys (and answered quoting them): the keys went where they could show."""
    assert any(LAMBDA_KEY in seen for seen in _EchoApi.seen), _EchoApi.seen
    assert any(RUNPOD_KEY in seen for seen in _EchoApi.seen), _EchoApi.seen


MODULES = """\
- name: Every module, its journal {what}
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuprov.cloud.gpuprov: {defaults}
  vars:
    clouds: [lambda, runpod, local]
    scratch: "{{{{ lookup('env', 'TMPDIR') }}}}/{name}"
  tasks:
    - gpuprov.cloud.offers: {{clouds: "{{{{ clouds }}}}", cloud_options: "{{{{ co }}}}"}}
    - name: offers as a module (an environment keyword, so not in the controller's process)
      gpuprov.cloud.offers: {{clouds: "{{{{ clouds }}}}", cloud_options: "{{{{ co }}}}"}}
      environment: {{GPUPROV_SV: "1"}}
    - gpuprov.cloud.instance_info: {{name: sv2, cloud: lambda, cloud_options: "{{{{ co }}}}"}}
      ignore_errors: true
    - gpuprov.cloud.instance: {{name: sv2, cloud: runpod, state: absent, cloud_options: "{{{{ co }}}}"}}
      ignore_errors: true
    - gpuprov.cloud.instance: {{name: sv2-{name}, cloud: local, cloud_options: "{{{{ co }}}}"}}
    - gpuprov.cloud.instance: {{name: sv2-{name}, cloud: local, state: absent, cloud_options: "{{{{ co }}}}"}}
    - gpuprov.cloud.journal_info: {{}}
    - name: journal_info with an argument that does not validate
      gpuprov.cloud.journal_info: {{limit: not-a-number}}
      ignore_errors: true
    - name: offers with an argument that does not validate
      gpuprov.cloud.offers: {{gpu_count: not-a-number, cloud_options: "{{{{ co }}}}"}}
      ignore_errors: true
    - gpuprov.cloud.orphans: {{clouds: "{{{{ clouds }}}}", cloud_options: "{{{{ co }}}}"}}
    - gpuprov.cloud.health_info: {{clouds: "{{{{ clouds }}}}", cloud_options: "{{{{ co }}}}"}}
    - gpuprov.cloud.vm: {{name: sv3-{name}, cloud: local, cloud_options: "{{{{ co }}}}", k8s: false}}
    - gpuprov.cloud.ssh_files: {{name: sv3-{name}}}
    - gpuprov.cloud.vm_stage: {{name: sv3-{name}, stage: Installing, note: a stage}}
    - gpuprov.cloud.vm: {{name: sv3-{name}, cloud: lambda, state: absent, cloud_options: "{{{{ co }}}}"}}
      ignore_errors: true
    - gpuprov.cloud.vm: {{name: sv3-{name}, cloud: local, state: absent, cloud_options: "{{{{ co }}}}"}}
    - gpuprov.cloud.k3s_kubeconfig: {{name: sv3, k3s_yaml: "{{{{ k3s_yaml }}}}", server: "https://127.0.0.1:9",
                                     dir: "{{{{ scratch }}}}"}}
    - gpuprov.cloud.k3s_validate: {{name: sv3, kubeconfig: "{{{{ scratch }}}}/gpuprov-sv3.yaml", timeout: 1,
                                    interval: 1}}
      ignore_errors: true
    - gpuprov.cloud.k3s_probe: {{state_dir: "{{{{ scratch }}}}/probe", k3s_binary: "{{{{ scratch }}}}/k3s"}}
    - name: journal_info on a journal that refuses the password
      gpuprov.cloud.journal_info: {{journal: "{{{{ dsn_wrong }}}}"}}
      ignore_errors: true
    - name: vm on a journal server that does not answer
      gpuprov.cloud.vm: {{name: sv4, cloud: local, journal: "{{{{ dsn_refused }}}}", cloud_options: "{{{{ co }}}}"}}
      ignore_errors: true
"""

K3S_YAML = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters:
    - cluster: {certificate-authority-data: Zm9v, server: "https://127.0.0.1:6443"}
      name: default
    contexts:
    - context: {cluster: default, user: default}
      name: default
    current-context: default
    users:
    - name: default
      user: {client-certificate-data: Zm9v, client-key-data: YmFy}
    """)


def test_every_module_at_vvv_shows_no_password_and_no_api_key(job: Job):
    playbook = job.inputs / "modules.yml"
    playbook.write_text(
        MODULES.format(what="DSN with its password", name="inline",
                       defaults=json.dumps({"journal": "{{ dsn_pw }}"}))
        + MODULES.format(what="password as journal_password", name="option",
                         defaults=json.dumps({"journal": "{{ dsn }}", "journal_password": "{{ pw }}"})))
    from ansible_collections.gpuprov.cloud.tests import pg_server
    with _busy_port() as closed:
        refused = "postgresql://gpuprov:%s@127.0.0.1:%d/db" % (pg_server.PASSWORD, closed.getsockname()[1])
    extra = {"dsn": job.dsn, "dsn_pw": job.dsn_pw, "pw": pg_server.PASSWORD, "co": job.cloud_options,
             "k3s_yaml": K3S_YAML, "dsn_wrong": job.dsn_pw.replace(pg_server.PASSWORD, WRONG_PASSWORD),
             "dsn_refused": refused}
    run = job.tool("ansible-playbook", "-e", json.dumps(extra), str(playbook))
    assert run.rc == 0, run
    assert run.out.count("TASK [gpuprov.cloud.k3s_probe]") == 2, run
    assert "password authentication failed" in run.out, run
    _assert_both_keys_were_sent()
    job.assert_nothing_shows()
    assert MASKED_DSN in run.out, run
