"""Writes the journals of this folder: one per non-terminal launch and teardown state, as the code
of commit 9faadf1 journals it, each beside the state of the scripted clouds it was made on.

Run it with a checkout of 9faadf1 first on the path, for example:

    mkdir -p /tmp/old9/src /tmp/old9/build/collections/ansible_collections/gpuprov
    git archive 9faadf1 | tar -x -C /tmp/old9/src
    ln -s /tmp/old9/src /tmp/old9/build/collections/ansible_collections/gpuprov/cloud
    PYTHONPATH=/tmp/old9/build/collections python tests/unit/data/journals_9faadf1/make_journals.py \\
        tests/unit/data/journals_9faadf1

Each scenario runs the real executor and machines on the scripted clouds (tests/fakes) and kills
the run (a BaseException, as a SIGKILL would) right before a chosen transition is committed, so
the journal holds the state before it, with the lease released as a dead run's is taken over.
``manifest.json`` lists every journal (its state, label, the run's settings and what the scripted
clouds must look like); test_journals_9faadf1.py resumes each one under the current code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import sys
import tempfile

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, World, at, offer

A = "fakea"
NAME = "vm1"


class Crash(BaseException):
    """The controller dies: nothing after the raise point runs (no commit)."""


def leaving(kind, inner=None):
    """before_commit hook: die right before the first transition out of ``kind`` (and, for a launch's
    Compensating state, out of its teardown's ``inner`` state) is committed."""
    def hook(old, new):
        if old["kind"] == kind and (inner is None or old["teardown"]["kind"] == inner):
            raise Crash("killed leaving %s for %s" % (kind, new["kind"]))
    return hook


def two_zone_cloud():
    return ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r1", zone="r1-b")])


def cloud_state(provider):
    """What a scripted cloud holds, as JSON (its scripted failures are not kept: the resumed run meets
    a cloud that works)."""
    def instance(inst):
        data = dataclasses.asdict(inst)
        data["location"] = inst.location.to_dict()
        data["profile"] = {k: v for k, v in dataclasses.asdict(inst.profile).items() if k != "where"}
        return data
    return {"cloud": provider.cloud, "offers": [o.to_dict() for o in provider.offers],
            "boot_observes": provider.boot_observes, "gone_after": provider.gone_after,
            "instances": [instance(i) for i in provider.instances.values()], "gone": list(provider.gone),
            "created": list(provider.created), "side": [[vm, loc, sg] for (vm, loc), sg in provider.side.items()],
            "side_removed": list(provider.side_removed), "serial": provider._serial}


def launch_until(world, hook):
    try:
        world.launch(before_commit=hook)
    except Crash:
        return
    raise AssertionError("the run ended without reaching the crash point")


def down_until(world, hook):
    try:
        world.down(before_commit=hook)
    except Crash:
        return
    raise AssertionError("the teardown ended without reaching the crash point")


def scenarios():
    """(name, settings, build) where build(world, provider) drives the world to its crash."""
    def fresh(kind, inner=None):
        return lambda w, p: launch_until(w, leaving(kind, inner))

    def failing_first_zone(kind, inner=None):
        def build(w, p):
            # The first zone's create is refused after the instance was made (a lost response): the
            # compensation finds it, deletes it, waits for it to go and cleans up.
            p.fail("create", ProviderError(ErrorKind.CAPACITY, "no capacity in r1-a"), where=at(zone="r1-a"),
                   after=True)
            launch_until(w, leaving(kind, inner))
        return build

    def up_then(run):
        def build(w, p):
            w.launch()
            run(w)
        return build

    def exhausted(w, p):
        offers, p.offers = p.offers, []
        launch_until(w, leaving("Exhausted"))
        p.offers = offers

    return [
        ("launch-Reconciling", {}, fresh("Reconciling")),
        ("launch-Reconciling-ready", {}, up_then(lambda w: launch_until(w, leaving("Reconciling")))),
        ("launch-Planning", {}, fresh("Planning")),
        ("launch-Preparing", {}, fresh("Preparing")),
        ("launch-Creating", {}, fresh("Creating")),
        ("launch-Booting", {}, fresh("Booting")),
        ("launch-Connecting", {}, fresh("Connecting")),
        ("launch-Connecting-reused", {}, up_then(lambda w: launch_until(w, leaving("Connecting")))),
        ("launch-NextOffer", {}, failing_first_zone("NextOffer")),
        ("launch-Compensating-Requesting", {}, failing_first_zone("Compensating", "Requesting")),
        ("launch-Compensating-AwaitingGone", {}, failing_first_zone("Compensating", "AwaitingGone")),
        ("launch-Compensating-CleaningUp", {}, failing_first_zone("Compensating", "CleaningUp")),
        ("launch-Exhausted", {"retry_until_up": True, "exhausted_wait": 5.0}, exhausted),
        ("teardown-Requesting", {}, up_then(lambda w: down_until(w, leaving("Requesting")))),
        ("teardown-AwaitingGone", {}, up_then(lambda w: down_until(w, leaving("AwaitingGone")))),
        ("teardown-CleaningUp", {}, up_then(lambda w: down_until(w, leaving("CleaningUp")))),
    ]


def main(out_dir):
    manifest = []
    for name, settings, build in scenarios():
        work = tempfile.mkdtemp(prefix="gpuprov-9faadf1-")
        try:
            provider = two_zone_cloud()
            world = World(_Path(work), [provider], clouds=[A], vm_name=NAME, **settings)
            build(world, provider)
            row = world.row()
            if row.lease_owner:
                world.journal.release(NAME, row.lease_owner)   # the dead run's lease, as a resume takes it over
            world.journal.close()
            journal = os.path.join(out_dir, name + ".sqlite")
            shutil.copyfile(os.path.join(work, "journal.sqlite"), journal)
            db = sqlite3.connect(journal)
            # The smallest pages: the same database in a few kilobytes (out of WAL, which keeps its page size).
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute("PRAGMA page_size=512")
            db.execute("VACUUM")
            db.close()
            with open(os.path.join(out_dir, name + ".cloud.json"), "w") as handle:
                json.dump(cloud_state(provider), handle, indent=1, sort_keys=True)
                handle.write("\n")
            manifest.append({"name": name, "machine": row.kind, "kind": row.state["kind"], "label": row.label,
                             "settings": settings, "clouds": [A], "vm_name": NAME})
            print("%-36s %s %s" % (name, row.kind, row.label))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(out_dir, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")


class _Path(str):
    """What World expects of its tmp_path: ``path / name``."""

    def __truediv__(self, other):
        return os.path.join(self, other)


if __name__ == "__main__":
    main(sys.argv[1])
