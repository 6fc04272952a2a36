"""gpuprov.cloud.offers / instance / instance_info run by the real ansible-playbook on localhost (in
Ansible's process, through their action plugins; test_in_process_and_shipped_module_give_the_same_result
also ships the modules through AnsiballZ) against the local cloud: real sshd processes in a throw-away
state directory (the ``ansible`` fixture of conftest.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake

moto_ec2 = aws_fake.moto_ec2   # the session fixture: the shared moto server, fake credentials in env

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+"
                   r"skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)", re.M)
BIN = os.path.dirname(sys.executable)

HEAD = """\
- name: {title}
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuprov.cloud.gpuprov: {defaults}
  tasks:
"""
SAVE = """\
    - name: Save what the tasks returned
      ansible.builtin.copy:
        content: "{{{{ {{{names}}} | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0600"
      check_mode: false
      changed_when: false
"""


class Play:
    """A playbook written to tmp, run with the fixture's environment; results saved as JSON."""

    def __init__(self, ansible, tmp_path, title: str, tasks: str, names, defaults=None):
        """``defaults``: the module_defaults of the gpuprov group (the local cloud's by default)."""
        self.ansible = ansible
        self.path = tmp_path / ("%s.yml" % re.sub(r"\W+", "-", title).strip("-").lower())
        self.out = tmp_path / (self.path.stem + ".json")
        save = SAVE.format(names=", ".join("'%s': %s" % (n, n) for n in names))
        group = json.dumps(defaults if defaults is not None else {"cloud_options": {"local": {}}})
        self.path.write_text(HEAD.format(title=title, defaults=group) + tasks + save)

    def run(self, *args: str, env=None):
        if self.out.exists():
            self.out.unlink()
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(self.path), "-e", "out=%s" % self.out,
                               *args], env=dict(self.ansible.env, **(env or {})), cwd=str(self.ansible.home),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
        recap = {m.group(1): dict(zip(("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"),
                                      map(int, m.groups()[1:]), strict=True)) for m in RECAP.finditer(proc.stdout)}
        saved = json.loads(self.out.read_text()) if self.out.exists() else None
        assert "Traceback" not in proc.stdout and "MODULE FAILURE" not in proc.stdout, proc.stdout[-6000:]
        return proc, recap.get("localhost"), saved


INSTANCE = """\
    - name: {label}
      gpuprov.cloud.instance:
        name: prim1
        state: {state}
      register: {var}
"""
INFO = """\
    - name: Observe prim1
      gpuprov.cloud.instance_info:
        name: prim1
      register: info
"""


def test_offers_table_and_a_plan_that_fails(ansible, tmp_path):
    play = Play(ansible, tmp_path, "Offers", """\
    - name: Plan on the local cloud
      gpuprov.cloud.offers:
        clouds: [local]
      register: plan
    - name: Show the table
      ansible.builtin.debug:
        var: plan.table
    - name: A GPU the local cloud has not got
      gpuprov.cloud.offers:
        clouds: [local]
        gpu: H100
      register: nogpu
      ignore_errors: true
""", ["plan", "nogpu"])
    proc, recap, saved = play.run()
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["changed"] == 0 and recap["ignored"] == 1 and recap["failed"] == 0, recap
    plan = saved["plan"]
    assert plan["changed"] is False and plan["available"] == 1
    [row] = plan["offers"]
    assert (row["cloud"], row["region"], row["instance_type"], row["gpu"], row["gpu_count"], row["price_per_hour"],
            row["available"], row["unavailable_reason"], row["rank"]) == (
        "local", "local", "sshd", None, 0, 0.0, True, None, 1)
    assert plan["table"][0].split()[:8] == ["#", "CLOUD", "REGION", "ZONE", "TYPE", "GPU", "$/H", "AVAILABLE"]
    assert plan["table"][1].split() == ["1", "local", "local", "-", "sshd", "-", "0", "yes"]
    assert plan["table"][1] in proc.stdout   # the debug task printed the table
    nogpu = saved["nogpu"]
    assert nogpu["failed"] is True and nogpu["changed"] is False
    assert nogpu["msg"].startswith("no cloud could plan this request: local: InvalidRequest: gpu: the local cloud "
                                   "has no GPUs")
    assert nogpu["errors"][0]["kind"] == "InvalidRequest"
    assert ansible.live_sshd() == []


def test_instance_lifecycle_check_mode_idempotency_and_info(ansible, tmp_path):
    # 1. check mode: predicts a create, makes nothing (no sshd, no local folder, not even the key)
    present = Play(ansible, tmp_path, "Present twice", INSTANCE.format(label="Make prim1", state="present", var="first")
                   + INSTANCE.format(label="Make prim1 again", state="present", var="second") + INFO,
                   ["first", "second", "info"])
    proc, recap, saved = present.run("--check")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert saved["first"]["changed"] is True and saved["first"]["instance"] is None
    assert saved["first"]["msg"] == "prim1: would prepare and create local:local:sshd"
    assert saved["info"]["instances"] == [] and saved["info"]["exists"] is False
    assert ansible.live_sshd() == []
    assert not (ansible.home / "local").exists() and not (ansible.home / "id_ed25519").exists()

    # 2. present, then present again in the same play: one instance, second task unchanged
    proc, recap, saved = present.run()
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["changed"] == 1 and recap["failed"] == 0, recap
    first, second, info = saved["first"], saved["second"], saved["info"]
    made = first["instance"]["instance_id"]
    assert first["changed"] is True and first["msg"].startswith("prim1: created %s at local/local" % made)
    assert second["changed"] is False and second["instance"]["instance_id"] == made
    assert first["prepared"]["sshd"] and second["prepared"] is None   # it exists: nothing was prepared
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [made]
    assert info["exists"] is True and [i["instance_id"] for i in info["instances"]] == [made]
    assert info["instances"][0]["ssh_host"] == "127.0.0.1" and info["instances"][0]["cloud"] == "local"

    # 3. and a whole second run changes nothing either
    proc, recap, saved = present.run()
    assert proc.returncode == 0 and recap["changed"] == 0, proc.stdout[-6000:]
    assert saved["first"]["instance"]["instance_id"] == made
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [made]

    # 4. absent in check mode: predicts the delete, deletes nothing
    absent = Play(ansible, tmp_path, "Absent twice", INSTANCE.format(label="Remove prim1", state="absent", var="first")
                  + INSTANCE.format(label="Remove prim1 again", state="absent", var="second") + INFO,
                  ["first", "second", "info"])
    proc, recap, saved = absent.run("--check")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert saved["first"]["changed"] is True and saved["first"]["deleted"] == [made]
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [made]

    # 5. absent twice: the first removes the instance and its folder, the second changes nothing
    proc, recap, saved = absent.run()
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["changed"] == 1, recap
    assert saved["first"]["changed"] is True and saved["first"]["deleted"] == [made]
    assert saved["first"]["cleaned_up"] is True
    assert saved["second"]["changed"] is False and saved["second"]["deleted"] == []
    assert saved["info"]["exists"] is False and saved["info"]["instances"] == []
    assert ansible.live_sshd() == [] and not (ansible.home / "local" / "prim1").exists()


def test_a_classified_error_fails_the_task_with_kind_and_message(ansible, tmp_path):
    play = Play(ansible, tmp_path, "Errors", """\
    - name: An unknown cloud
      gpuprov.cloud.instance:
        name: prim2
        cloud: nimbus
      register: unknown
      ignore_errors: true
    - name: An observe that cannot read the VM's folder
      gpuprov.cloud.instance_info:
        name: prim2
        cloud_options:
          local:
            root: "{{ broken }}"
      register: broken_root
      ignore_errors: true
""", ["unknown", "broken_root"])
    broken = tmp_path / "broken-root"
    broken.mkdir()
    (broken / "prim2").write_text("a file where the VM's folder should be")
    proc, recap, saved = play.run("-vvv", "-e", "broken=%s" % broken)
    assert proc.returncode == 0 and recap["ignored"] == 2, proc.stdout[-6000:]
    assert saved["unknown"]["msg"].startswith("InvalidRequest: cloud: unknown cloud 'nimbus'; expected one of")
    # the message is readable: only the credentials among cloud_options are hidden in results
    assert saved["broken_root"]["msg"].startswith("Transient: reading %s: [Errno 20] Not a directory"
                                                  % (broken / "prim2"))
    assert saved["broken_root"]["msg"].endswith("(observe at local/local)")
    # ... and in the invocation (printed at -vvv), where the local cloud's options show, typed
    assert '"root": "%s"' % broken in proc.stdout and "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" not in proc.stdout
    assert saved["broken_root"]["error"]["primitive"] == "observe"
    # the failure is printed as the task's message, not as a module traceback
    assert "fatal: [localhost]: FAILED!" in proc.stdout and '"msg": "Transient: reading' in proc.stdout


# -- aws and gcp against their fakes, reached from the module processes over HTTP ----------------------

@pytest.fixture
def gcp_fake():
    pytest.importorskip("google.cloud.compute_v1")
    pytest.importorskip("pytest_httpserver")
    from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake
    fake = GcpComputeFake()
    yield fake
    fake.stop()


def test_offers_and_instance_on_aws_and_gcp_fakes(moto_ec2, gcp_fake, ansible, tmp_path):
    creds = dict(moto_ec2.new_account(), aws_secret_access_key="s3cr3t-" + uuid.uuid4().hex)
    opts = {"aws": dict(creds, endpoint_url=moto_ec2.endpoint_url, regions=["us-east-1"], allowed_cidrs=["198.51.100.7/32"],
                        ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url=""),
            "gcp": {"project": gcp_fake.project, "api_endpoint": gcp_fake.url, "zones": ["us-central1-a"],
                    "allowed_cidrs": ["198.51.100.7/32"], "read_retry_s": 0}}
    aws_env = dict(aws_fake.FAKE_ENV)
    play = Play(ansible, tmp_path, "Clouds", """\
    - name: Plan T4 on aws then gcp
      gpuprov.cloud.offers:
        clouds: [aws, gcp]
        gpu: T4
        cloud_options: "{{ opts }}"
      register: plan
    - name: One gcp instance, twice
      gpuprov.cloud.instance:
        name: prim3
        cloud: gcp
        gpu: T4
        zone: us-central1-a
        cloud_options: "{{ opts }}"
      register: first
      loop: [1, 2]
    - name: Observe it
      gpuprov.cloud.instance_info:
        name: prim3
        cloud: gcp
        region: us-central1
        zone: us-central1-a
        cloud_options: "{{ opts }}"
      register: info
    - name: Remove it, twice
      gpuprov.cloud.instance:
        name: prim3
        cloud: gcp
        region: us-central1
        zone: us-central1-a
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
      loop: [1, 2]
""", ["plan", "first", "info", "gone"])
    proc, recap, saved = play.run("-vvv", "-e", json.dumps({"opts": opts}), env=aws_env)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["changed"] == 2 and recap["failed"] == 0, recap
    # the credentials never show, not even at -vvv; the rest of the results stays readable
    secret = creds["aws_secret_access_key"]
    assert secret not in proc.stdout and secret not in json.dumps(saved)
    assert creds["aws_access_key_id"] not in proc.stdout
    assert '"aws_secret_access_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in proc.stdout
    assert '"endpoint_url": "%s"' % moto_ec2.endpoint_url in proc.stdout   # the invocation hides only credentials
    assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" not in json.dumps(saved["plan"]["offers"])
    assert "********" not in "".join(saved["plan"]["table"])

    plan = saved["plan"]
    assert [(r["rank"], r["cloud"], r["instance_type"], r["zone"]) for r in plan["offers"]][-1] == (
        len(plan["offers"]), "gcp", "n1-standard-4", "us-central1-a")
    assert [r["instance_type"] for r in plan["offers"] if r["cloud"] == "aws"][:2] == ["g4dn.xlarge", "g4dn.2xlarge"]
    assert plan["errors"] == [] and [c["cloud"] for c in plan["clouds"]] == ["aws", "gcp"]

    made, again = saved["first"]["results"]
    assert made["changed"] is True and again["changed"] is False
    assert made["instance"]["instance_id"] == again["instance"]["instance_id"] == "prim3"
    # the firewall rule is named after the VM and the task's journal (the instance module tags with its id)
    assert re.match(r"^gpuprov-prim3-j[0-9a-f]{8}$", made["prepared"]["firewall"])
    assert made["offer"]["offer_id"] == "gcp:us-central1:n1-standard-4:us-central1-a"
    assert [i["instance_id"] for i in saved["info"]["instances"]] == ["prim3"]
    assert saved["info"]["instances"][0]["status"] == "Pending"   # the fake leaves it PROVISIONING
    assert len(gcp_fake.calls_of("instances.insert")) == 1   # the second run created nothing

    removed, noop = saved["gone"]["results"]
    assert removed["changed"] is True and removed["deleted"] == ["prim3"] and removed["cleaned_up"] is True
    assert noop["changed"] is False and noop["deleted"] == []
    assert gcp_fake.instances == {} and gcp_fake.firewalls == {}
    # nothing was made on aws: offers only plans
    assert moto_ec2.calls("RunInstances", creds["aws_access_key_id"]) == []


PATHS = """\
    - name: Offers in Ansible's process (localhost, the controller's Python)
      gpuprov.cloud.offers:
        cloud_options: {local: {}, aws: {aws_secret_access_key: "sekrit-%(mark)s"}}
      register: here
    - name: The same offers through the module (the environment keyword makes Ansible ship it)
      gpuprov.cloud.offers:
        cloud_options: {local: {}, aws: {aws_secret_access_key: "sekrit-%(mark)s"}}
      environment: {GPUPROV_PATH_CHECK: "1"}
      register: shipped
    - name: An unknown option, in Ansible's process
      gpuprov.cloud.instance_info:
        name: prim1
        colour: blue
      register: unknown_here
      ignore_errors: true
    - name: The same through the module
      gpuprov.cloud.instance_info:
        name: prim1
        colour: blue
      environment: {GPUPROV_PATH_CHECK: "1"}
      register: unknown_shipped
      ignore_errors: true
"""


def test_in_process_and_shipped_module_give_the_same_result(ansible, tmp_path):
    mark = uuid.uuid4().hex[:8]
    play = Play(ansible, tmp_path, "Two paths", PATHS % {"mark": mark},
                ["here", "shipped", "unknown_here", "unknown_shipped"])
    proc, recap, saved = play.run("-vvv")
    assert recap["failed"] == 0 and recap["ignored"] == 2, proc.stdout[-4000:]
    # Only the tasks with an environment were shipped: AnsiballZ ran twice, once per module.
    for module in ("offers", "instance_info"):
        ran = re.findall(r"python\S* \S+/AnsiballZ_%s\.py" % module, proc.stdout)
        assert len(ran) == 1, (module, ran, proc.stdout[-6000:])
    here, shipped = saved["here"], saved["shipped"]
    for key in ("changed", "offers", "table", "clouds", "msg"):
        assert here.get(key) == shipped.get(key), key
    assert here["offers"] and here["changed"] is False
    # The credential is hidden in both invocations (printed at -vvv), the rest stays readable.
    assert "sekrit-%s" % mark not in proc.stdout
    assert proc.stdout.count('"aws_secret_access_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"') >= 2
    for unknown in (saved["unknown_here"], saved["unknown_shipped"]):
        assert unknown["failed"] is True
        assert unknown["msg"].startswith("Unsupported parameters for (gpuprov.cloud.instance_info) module: colour."), \
            unknown["msg"]
