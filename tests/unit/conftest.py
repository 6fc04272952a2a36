# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures the unit tests share; pytest hands them to every test under tests/unit by name.

home      a private state directory (tmp_path) in GPUPROV_HOME, GPUPROV_JOURNAL unset
clock     a FakeClock at 1000.0 s: time moves only when a test or an injected wait moves it
jpath     the SQLite journal's path, state/journal.sqlite under tmp_path (the folder is not made yet)
journals  opens SQLite journals on jpath with the fake clock, each one its own connection
journal   one such journal
aws       the AWS adapter on moto's EC2 server (a fresh account) with journal id AWS_JOURNAL_ID, and an EC2 client

A file that needs more defines a fixture of the same name that asks for the shared one
(``def home(home): ...``): it gets this one and adds its own setup or teardown, said there.
Plain helpers (wait_for) are in helpers.py.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import FakeClock


@pytest.fixture
def home(tmp_path, monkeypatch):
    """tmp_path as the controller's state directory: the journal (journal.sqlite), the collection's SSH key, the
    ssh_config and the local cloud's instances of the test go there, and no journal named in the environment
    is used."""
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    return tmp_path


@pytest.fixture
def clock():
    """A FakeClock (tests/fakes/toy_machine.py) at 1000.0: ``clock()`` reads it, ``clock.advance(s)`` moves it."""
    return FakeClock(1000.0)


@pytest.fixture
def jpath(tmp_path):
    """Where the test's SQLite journal lives: in a folder that opening the journal makes (0700)."""
    return str(tmp_path / "state" / "journal.sqlite")


@pytest.fixture
def journals(jpath, clock):
    """Opens machine journals (machine/journal.py) on jpath with the fake clock; two are two connections, as two
    runs on one controller have. Each is closed at the end of the test."""
    # Imported here, not at the top: an import error in the journal then fails the tests that use it, not the
    # collection of every unit test.
    from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal

    opened = []

    def open_journal():
        j = Journal(jpath, clock=clock)
        opened.append(j)
        return j
    yield open_journal
    for j in opened:
        j.close()


@pytest.fixture
def journal(journals):
    """One machine journal on jpath with the fake clock, closed at the end."""
    return journals()


# The journal id the ``aws`` fixture's adapter tags with.
AWS_JOURNAL_ID = "0123456789abcdef"


@pytest.fixture
def aws():
    """(the AWS adapter, a boto3 EC2 client of us-east-1) on the shared moto server (tests/fakes/moto_ec2.py), in an
    account of the test's own, cleared at the end; skipped without boto3 and moto."""
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
    from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2
    fake = moto_ec2.shared_server()
    creds = fake.new_account()
    provider = AwsProvider(dict(creds, endpoint_url=fake.endpoint_url, allowed_cidrs=["203.0.113.7/32"],
                                ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url=""),
                           journal_id=AWS_JOURNAL_ID)
    yield provider, fake.client("ec2", "us-east-1", creds)
    fake.clear(account=creds["aws_access_key_id"])
