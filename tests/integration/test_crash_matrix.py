"""The crash matrix: SIGKILL the real ansible-playbook at every crash point of provision, down
and reap (-e delete=true, of a VM past its ttl), on the local cloud (real sshd) and the docker
cloud (real engine), and check after each kill that a re-run converges: exactly one VM after
provision, none after down or reap (nor its row in the VM list, ssh_config or the journalled
limits), and a journal that never says Done (or Ready) while something else exists. See
tests/crashpoints/harness.py.

Default: on each cloud, one point per class of consecutive points that leave the same durable
state (a kill at any of them leaves the next run the same facts), the first of each class; the
matrix marks the others "= <outcome>". GPUPROV_CRASH_MATRIX=full kills at every point;
GPUPROV_CRASH_MATRIX=off skips the matrix; GPUPROV_CRASH_JOBS sets how many points run at once
(default 4); GPUPROV_CRASH_ONLY=<regex> narrows the points. The matrix is printed (pytest -s)
and written to crash-matrix.txt (and .json) in the test's tmp dir. See docs/recovery.md.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from ansible_collections.gpuprov.cloud.tests.crashpoints import harness

RESULTS = {}


@pytest.fixture(scope="module", autouse=True)
def combined_report(tmp_path_factory):
    """After both clouds ran: the combined matrix (point x cloud x outcome) and its totals."""
    yield
    if len(RESULTS) > 1:
        text = harness.render(RESULTS)
        path = tmp_path_factory.mktemp("crash-matrix") / "crash-matrix.txt"
        path.write_text(text + "\n")
        print("\n\ncrash matrix, all clouds (%s):\n%s" % (path, text))


def _matrix(cloud: harness.Cloud, tmp_path, prefix: str, mode: str) -> None:
    started = time.monotonic()
    sandbox = harness.Sandbox(tmp_path / "sandbox", cloud.args())
    phase_seconds = {}
    try:
        points, problems = harness.trace(cloud, sandbox, prefix + "-trace")
        assert not problems, "\n".join(problems)
        chosen = {phase: harness.select(points[phase], mode) for phase in harness.PHASES}
        outcomes = harness.run_matrix(cloud, chosen, sandbox, prefix, seconds=phase_seconds)
    finally:
        sandbox.close()
    RESULTS[cloud.name] = {"points": points, "outcomes": outcomes, "mode": mode,
                           "seconds": time.monotonic() - started, "phase_seconds": phase_seconds}
    (tmp_path / "crash-matrix.json").write_text(harness.to_json({cloud.name: RESULTS[cloud.name]}))
    text = harness.render({cloud.name: RESULTS[cloud.name]})
    (tmp_path / "crash-matrix.txt").write_text(text + "\n")
    print("\n\ncrash matrix, %s (%s; logs in %s):\n%s"
          % (cloud.name, tmp_path / "crash-matrix.txt", tmp_path / "sandbox", text))
    failing = [o for o in outcomes if o.status == "FAIL"]
    assert not failing, "%d of %d crash points fail on %s:\n%s" % (
        len(failing), len(outcomes), cloud.name, "\n".join(
            "%s %s (VM %s%s): %s" % (o.point.phase, o.point.name, o.vm, ", " + o.context if o.context else "",
                                     "; ".join(o.symptoms)) for o in failing))


@pytest.fixture
def mode():
    found = harness.matrix_mode()
    if found == "off":
        pytest.skip("GPUPROV_CRASH_MATRIX=off")
    return found


def test_crash_matrix_local(tmp_path, mode):
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    cloud = harness.LocalCloud()
    _matrix(cloud, tmp_path, harness.new_prefix(cloud), mode)


def test_crash_matrix_docker(tmp_path, mode):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker as docker_mod
    from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine

    client, why = docker_engine.engine()
    if client is None:
        pytest.skip("the docker crash matrix needs a Docker engine: %s" % why)
    docker_engine.ensure_base_image(client, docker_mod.DEFAULT_BASE_IMAGE)
    cloud = harness.DockerCloud(client)
    prefix = harness.new_prefix(cloud)
    try:
        _matrix(cloud, tmp_path, prefix, mode)
    finally:
        docker_engine.remove_containers(client, prefix)   # whatever a failed check left
