"""The secrets a task's output hides besides its no_log options (module_utils/task_secrets.py): a journal
DSN's password in every form libpq reads, the environment's credentials, and a module that hides them
from its first line of output on, even when its arguments do not validate (journal_module.JournalModule)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import (
    Hidden, dsn_secrets, environment_secrets, task_secrets,
)

MODULES = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "modules"


@pytest.mark.parametrize("dsn,expected", [
    ("postgresql://user:s3cret@db.example:5432/journal", {"s3cret"}),
    ("postgres://user:s3cret@db.example/journal", {"s3cret"}),
    ("  POSTGRESQL://user:s3cret@db.example/journal", {"s3cret"}),
    ("postgresql://user:p%40ss%2Fw@db.example/journal", {"p%40ss%2Fw", "p@ss/w"}),
    ("postgresql://user:p@ss@db.example/journal", {"p@ss"}),                  # an unencoded @ in the password
    ("postgresql://user:pa/ss@db.example/journal", {"pa/ss"}),                # ... or /, which libpq refuses
    ("postgresql://user:pa?ss#x@db.example/journal", {"pa?ss#x"}),
    ("postgresql://user@db.example/journal?sslmode=require&password=qw%26e", {"qw%26e", "qw&e"}),
    ("postgresql://user:one@h1:5432,h2:5433/journal?password=two", {"one", "two"}),
    ("postgresql://user@db.example/journal", set()),
    ("postgresql://db.example/journal?sslmode=require", set()),
    ("/var/lib/gpuprov/a:b@c/journal.sqlite", set()),                         # an SQLite path
    (None, set()),
])
def test_the_password_of_a_dsn_in_each_form(dsn, expected):
    assert dsn_secrets(dsn) == expected


def test_the_environment_s_secrets_are_the_journal_s():
    environ = {"GPUPROV_JOURNAL": "postgresql://u:envpw@h/db", "PGPASSWORD": "pgpw", "HOME": "/home/u",
               # an adapter scrubs the credential it reads from its environment from its own messages
               "LAMBDA_API_KEY": "lk"}
    assert environment_secrets(environ) == {"envpw", "pgpw"}
    assert environment_secrets({"GPUPROV_JOURNAL": "/var/lib/gpuprov/journal.sqlite"}) == set()


def test_a_task_s_secrets_are_its_journal_s_and_its_journal_password():
    params = {"journal": "postgresql://u:optpw@h/db", "journal_password": "jpw", "name": "x"}
    assert task_secrets(params, environ={}) == {"optpw", "jpw"}
    assert task_secrets({"journal": "/tmp/journal.sqlite"}, environ={}) == set()


def test_hidden_masks_each_secret_wherever_it_shows_and_keeps_the_flags():
    hidden = Hidden({"journal": "postgresql://u:optpw@h/db"}, ["k3y-secret-value"])
    result = hidden.result({"failed": True, "changed": False, "msg": "journal postgresql://u:optpw@h/db: no",
                            "nested": [{"key": "k3y-secret-value", "n": 1, "none": None}]})
    assert result == {"failed": True, "changed": False, "msg": "journal postgresql://u:********@h/db: no",
                      "nested": [{"key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER", "n": 1, "none": None}]}
    assert hidden.text("a line with k3y-secret-value") == "a line with ********"
    nothing = Hidden({"journal": "/tmp/j.sqlite"})
    assert nothing.values == set() and nothing.text("k3y-secret-value") == "k3y-secret-value"


def test_the_boot_scripts_ordinary_values_never_blank_the_result_and_credentials_always_masked():
    """The k3s installer's environment is a no_log option; its port or a wait must not blank the VM's port,
    while a credential, numeric or short, is masked wherever it shows."""
    params = {"journal": "postgresql://u:pw@h/db", "journal_password": "pw2",
              "boot_script": {"script": "#!/bin/sh",
                              "env": {"PORT": "6443", "WAIT": "120", "GPU": "true", "TOKEN": "a-long-token-value",
                                      "ALSO": "2222"}},
              "cloud_options": {"aws": {"aws_access_key_id": "100000008238", "aws_secret_access_key": "2222"}}}
    hidden = Hidden(params, ["6443", "120", "true", "a-long-token-value", "2222", "100000008238", "#!/bin/sh"])
    result = hidden.result({"connection": {"ansible_port": 6443, "ansible_host": "127.0.0.1"},
                            "msg": "up on port 6443 after 120 s with a-long-token-value, key 100000008238, "
                                   "postgresql://u:pw@h/db pw2"})
    assert result["connection"] == {"ansible_port": 6443, "ansible_host": "127.0.0.1"}
    assert result["msg"] == "up on port 6443 after 120 s with ********, key ********, postgresql://u:********@h/db ********"
    # A credential equal to an ordinary boot value is still a credential: masked.
    assert "2222" in hidden.values


def _run_module(module, args):
    proc = subprocess.run([sys.executable, str(MODULES / ("%s.py" % module))], capture_output=True, text=True,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    return proc.stdout + proc.stderr, json.loads(proc.stdout)


@pytest.mark.parametrize("module,args", [
    ("journal_info", {"limit": "not-a-number"}),      # refused by its argument spec: the earliest output there is
    ("journal_info", {}),                             # a journal server that does not answer
    ("offers", {"gpu_count": "not-a-number"}),
    ("vm", {"name": "a"}),                            # a module whose action plugin does the work, run as a module
])
def test_a_module_never_shows_the_password_of_its_journal_dsn(module, args):
    dsn = "postgresql://gpuprov:Pa55-in-dsn@127.0.0.1:9/journal?password=Pa55-in-query"
    out, result = _run_module(module, dict(args, journal=dsn))
    assert result["failed"] is True, result
    assert "Pa55" not in out
    assert result["invocation"]["module_args"]["journal"] == (
        "postgresql://gpuprov:********@127.0.0.1:9/journal?password=********")
