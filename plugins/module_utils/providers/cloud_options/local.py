# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the local cloud (``cloud_options.local``)."""

from __future__ import annotations

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(local) cloud: each VM is an sshd on a loopback port of the controller; no credentials. Its "
               "instance records (C(<root>/<name>/<instance id>/), the cloud side of a loopback VM) stay on the "
               "machine that made them: controllers sharing a journal must share that folder too (the C(root) "
               "option, journalled with the VM), and a new machine cannot see such a VM.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Keeps them with the instance's record; those of a VM that is already there are changed in place.")

OPTIONS = dict(
    root=dict(type="path", description="Folder of the instances' state. Unset: C(<state dir>/local)."),
    user=dict(type="str", description="The login user; it must be the user running the controller's tasks or one "
                                      "sshd may switch to. Unset: the current user."),
    sshd=dict(type="path", description="The OpenSSH server binary. Unset: C(sshd) on the PATH, else "
                                       "C(/usr/sbin/sshd)."),
    python_interpreter=dict(type="str", description="The Python Ansible uses on the instance. Unset: the "
                                                    "controller's own."),
)
