# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the docker test cloud (``cloud_options.docker``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# Made offline by scripts/build-base-image.sh (debootstrap + docker import).
DEFAULT_BASE_IMAGE = "gpuprov/debian-base:bookworm"
DEFAULT_PYTHON = "/usr/bin/python3"   # scripts/build-base-image.sh installs python3

# What the documentation says of the cloud, above its options.
DESCRIPTION = "The V(docker) test cloud: each VM is a container running sshd on a Docker engine."

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Labels the container. A container's labels are fixed: those of a VM that is already there cannot change "
        "(a warning says so once per asked-for change, and the VM keeps the labels it was made with).")

OPTIONS = dict(
    docker_host=dict(
        type="str", fallback=shared.from_environment("DOCKER_HOST"),
        description="The Docker engine's address (V(unix:///var/run/docker.sock), V(tcp://host:2376)). Unset "
                    "(here and in the environment): the default socket."),
    base_image=dict(
        type="str", default=DEFAULT_BASE_IMAGE,
        description="Image the sshd image is built FROM; it must have openssh-server (the default one is made "
                    "offline by the collection's C(scripts/build-base-image.sh))."),
    image=dict(type="str", description="Tag of the sshd image. Unset: derived from the Dockerfile and the base "
                                       "image id."),
    privileged=dict(type="bool", default=False,
                    description="Run the containers privileged, which k3s needs (the cloud can host k3s only then)."),
    privileged_cap_drop=dict(
        type="list", elements="str",
        description="With C(privileged): capabilities the engine's host lacks (for example V(SYS_RESOURCE) on a "
                    "nested engine where C(--privileged) fails with 'unable to apply caps'). The containers then "
                    "get every other capability and no seccomp or AppArmor confinement instead."),
    publish_host=dict(type="str", default="127.0.0.1", description="Host address port 22 is published on."),
    ssh_host=dict(type="str", description="Host of the SSH endpoint. Unset: C(publish_host), or V(127.0.0.1) when "
                                          "publishing on all addresses."),
    ssh_port=dict(type="int", minimum=1, description="A fixed host port for SSH. Unset: Docker picks a free one."),
    init=dict(type="bool", default=True,
              description="Run a tiny init as PID 1 (docker run --init), which reaps the boot script's orphans."),
    timeout=shared.seconds(60, "Timeout of each Docker API call."),
    build_timeout=shared.seconds(600, "Timeout of the sshd image build."),
    python_interpreter=dict(type="str", default=DEFAULT_PYTHON,
                            description="The Python Ansible uses in the container."),
)

# No credentials: where an engine may answer, for the orphan sweep's choice of clouds only (never a refusal).
CREDENTIALS = shared.Credentials("docker", OPTIONS, sets=[("docker_host",)], files=("/var/run/docker.sock",),
                                 checked=False)
