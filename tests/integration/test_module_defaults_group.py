"""The module_defaults group ``group/gpuprov.cloud.gpuprov`` with every option it shares, set
once for a real ansible-playbook play that runs every member (vm, offers, instance,
instance_info, journal_info) on the local cloud: no member refuses a shared option, each
uses those it has a use for, and a credential among the defaults shows nowhere (not in
the -vvv output, not in any task's result) while regions and counts stay readable."""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import GROUP_SPEC

BIN = os.path.dirname(sys.executable)
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

PLAY = """\
- name: Every member of the group under one set of defaults
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuprov.cloud.gpuprov: "{{{{ group_defaults }}}}"
  tasks:
    - name: Plan
      gpuprov.cloud.offers:
      register: plan
    - name: Observe before anything exists
      gpuprov.cloud.instance_info:
        name: grp1
      register: before
    - name: A VM
      gpuprov.cloud.vm:
        name: grp1
      register: up
    - name: Its journal
      gpuprov.cloud.journal_info:
        name: grp1
      register: status
    - name: One instance
      gpuprov.cloud.instance:
        name: grp2
      register: made
    - name: Observe it
      gpuprov.cloud.instance_info:
        name: grp2
      register: seen
    - name: Remove it
      gpuprov.cloud.instance:
        name: grp2
        state: absent
      register: gone
    - name: Tear the VM down
      gpuprov.cloud.vm:
        name: grp1
        state: absent
      register: down
    - name: Save what the tasks returned
      ansible.builtin.copy:
        content: "{{{{ {names} | to_json }}}}"
        dest: "{out}"
        mode: "0600"
"""
NAMES = ("plan", "before", "up", "status", "made", "seen", "gone", "down")


@pytest.fixture
def login_key(ansible):
    path = ansible.home / "group-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "group@test", "-f", str(path)],
                   check=True, timeout=30)
    return path


@pytest.mark.parametrize("choice", [{"clouds": ["local"]}, {"cloud": "local"}, {"clouds": ["local"], "cloud": "local"}],
                         ids=["clouds", "cloud", "both"])
def test_every_member_takes_every_shared_option(ansible, tmp_path, login_key, choice):
    secret = "s3cr3t-" + uuid.uuid4().hex
    key_id = "AKIA" + uuid.uuid4().hex[:16].upper()
    db_secret = "pg-" + uuid.uuid4().hex    # a PostgreSQL journal's password: unused on SQLite, never shown
    journal = tmp_path / "group-journal.sqlite"
    defaults = dict(
        choice,
        cloud_options={"local": {"root": str(ansible.home / "local")},
                       "aws": {"aws_access_key_id": key_id, "aws_secret_access_key": secret,
                               "regions": ["eu-west-1"]}},
        gpu="none", gpu_count=1, regions=["local"], spot=False, prefer="price", max_price_per_hour=1.0,
        journal=str(journal), journal_password=db_secret, ssh_key=str(login_key), ssh_user=getpass.getuser(),
        boot_timeout=60, ssh_timeout=60, teardown_timeout=120, lease_ttl=90,
    )
    assert set(defaults) | {"clouds", "cloud"} == set(GROUP_SPEC)   # every option the group shares
    out = tmp_path / "results.json"
    playbook = tmp_path / "group.yml"
    playbook.write_text(PLAY.format(names="{%s}" % ", ".join("'%s': %s" % (n, n) for n in NAMES), out=out))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(playbook), "-vvv",
                           "-e", json.dumps({"group_defaults": defaults})],
                          env=ansible.env, cwd=str(ansible.home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert "Unsupported parameters" not in proc.stdout
    saved = json.loads(out.read_text())

    # each member used the shared options it has a use for
    plan = saved["plan"]
    assert [(r["cloud"], r["region"], r["gpu"]) for r in plan["offers"]] == [("local", "local", None)]
    assert saved["before"]["instances"] == [] and saved["before"]["exists"] is False
    up = saved["up"]
    assert up["state"] == "Ready" and up["vm"]["cloud"] == "local" and up["journal"] == str(journal)
    assert up["connection"]["ansible_ssh_private_key_file"] == str(login_key)
    assert [vm["name"] for vm in saved["status"]["vms"]] == ["grp1"] and saved["status"]["journal"] == str(journal)
    assert saved["made"]["changed"] is True and saved["seen"]["running"] is True
    assert saved["gone"]["changed"] is True
    assert saved["down"]["state"] == "Done" and ansible.live_sshd() == []

    # the credentials show nowhere; the rest of cloud_options and the results stay readable
    results = json.dumps(saved)
    for hidden in (secret, key_id, db_secret):
        assert hidden not in proc.stdout and hidden not in results
    assert '"aws_secret_access_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in proc.stdout   # the invocation
    assert '"eu-west-1"' in proc.stdout                                                       # a region of aws
    assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" not in results and "********" not in results
    assert plan["available"] == 1 and plan["offers"][0]["gpu_count"] == 0


def test_a_group_default_the_member_cannot_take_is_refused_by_name(ansible, tmp_path):
    """The group shares a fixed set: a cloud option of no cloud still fails clearly."""
    playbook = tmp_path / "wrong.yml"
    playbook.write_text("""\
- name: A misspelt adapter option among the group defaults
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuprov.cloud.gpuprov:
      cloud_options: {local: {rooot: /tmp}}
  tasks:
    - name: Plan
      gpuprov.cloud.offers:
""")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(playbook)], env=ansible.env,
                          cwd=str(ansible.home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    assert proc.returncode != 0
    assert "cloud_options.local.rooot" in proc.stdout and "root" in proc.stdout
