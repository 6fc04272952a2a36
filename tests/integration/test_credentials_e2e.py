"""provision on a cloud this controller has no credentials for, with the real ansible-playbook:
it stops at Planning with one line naming the missing credential and how to set it, changes
nothing, and its check mode and the offers module say the same."""

from __future__ import annotations

import json
import re

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import declared_credentials

# Nothing boto3 could find: no keys, empty shared files (in the run's own home), no metadata service.
NO_AWS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
          "AWS_EC2_METADATA_DISABLED": "true"}


def _no_aws(ansible):
    env = dict(NO_AWS, HOME=str(ansible.home), AWS_SHARED_CREDENTIALS_FILE=str(ansible.home / "aws-credentials"),
               AWS_CONFIG_FILE=str(ansible.home / "aws-config"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        ansible.env.pop(name, None)
        env.pop(name)
    return env


def _fatal_result(out: str) -> dict:
    found = re.search(r"^fatal: \[\w+\]: FAILED! => (\{.*\})$", out, re.MULTILINE)
    assert found, out
    return json.loads(found.group(1))


def test_provision_without_aws_credentials_stops_at_once_naming_them(ansible):
    env = _no_aws(ansible)
    expected = declared_credentials("aws").message()

    run = ansible.playbook("provision", "-e", "vm=nocreds", "-e", "gpu=H100", "-e", "clouds=aws", extra_env=env)

    assert run.rc != 0, run
    # The one line that says what is missing and how to set it.
    assert "[ERROR]: Task failed: Action failed: nocreds: Aborted: %s\n" % expected in run.out, run
    result = _fatal_result(run.out)
    assert result["changed"] is False and result["state"] == "Aborted"
    assert result["msg"] == "nocreds: Aborted: " + expected
    assert [(e["event"], e["to"]) for e in result["events"]] == [
        ("begin", "Reconciling"), ("transition", "Planning"), ("transition", "Aborted")]
    assert "retry" not in run.out and "Compensating" not in run.out and "Transient" not in run.out
    assert len(run.out) < 4000, run      # it was about 8.5 KB, 5 of them events

    check = ansible.playbook("provision", "--check", "-e", "vm=nocreds", "-e", "gpu=H100", "-e", "clouds=aws",
                             extra_env=env)
    assert check.rc != 0 and _fatal_result(check.out)["msg"] == "nocreds: no offer to try: " + expected, check

    offers = ansible.tool("ansible", "localhost", "-m", "gpuprov.cloud.offers", "-a", "clouds=aws gpu=H100",
                          extra_env=env)
    assert offers.rc != 0, offers
    assert "no cloud could plan this request: Credentials: " + expected in offers.out, offers
    assert '"available": true' not in offers.out, offers
