# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The module_defaults group C(group/gpuprov.cloud.gpuprov): the options every member
    accepts (module_utils/provider_args.py GROUP_SPEC). Use C(gpuprov.cloud.group) (the note)
    with the variant that says what the member does with the VM settings (journal, login, timeouts):
    C(gpuprov.cloud.group.vm_settings) (uses them, as M(gpuprov.cloud.vm) does) or
    C(gpuprov.cloud.group.vm_settings_ignored) (accepts them and ignores them; a member's own
    documentation of an option wins over the variant's). C(gpuprov.cloud.group.cloud_ignored)
    is for a member that calls no cloud (its O(cloud_options) too: such a member does not take the
    C(gpuprov.cloud.cloud_options) fragment).
    """

    DOCUMENTATION = r"""
options: {}
notes:
  - A member of the module_defaults group C(group/gpuprov.cloud.gpuprov), the modules that take O(journal). It
    accepts every option the group shares, so any can be a group default, and ignores those it has no use for,
    as their descriptions say.
"""

    # The VM settings as the vm module uses them.
    VM_SETTINGS = r"""
options:
  journal:
    description:
      - Where the journal is. A path is an SQLite journal (created 0600); a C(postgresql://) DSN is a journal in that
        PostgreSQL database, shared by every controller that names it (AWX nodes, teams).
      - Defaults to E(GPUPROV_JOURNAL), else C(<state dir>/journal.sqlite).
    type: path
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Never logged, journalled or shown.
    type: str
  ssh_key:
    description:
      - Private key used to log in to the VM. When unset, E(GPUPROV_SSH_KEY_FILE), else the task's
        C(ansible_ssh_private_key_file) (an AWX Machine credential), else the collection's own ed25519 key,
        C(<state dir>/id_ed25519), generated (0600) on first use.
      - The journal records the public key's fingerprint with each VM; a run holding another key is refused
        before it touches the VM.
    type: path
  ssh_user:
    description: Login user where the cloud does not dictate one (the image default otherwise).
    type: str
  boot_timeout:
    description: Seconds an instance may take to be Running with an SSH endpoint; unset means the cloud's own.
    type: int
  ssh_timeout:
    description: Seconds to wait for a successful SSH login once the instance is Running; unset means 300.
    type: int
  teardown_timeout:
    description: Seconds to wait for instances to be gone before the teardown is declared Leaked; unset means 600.
    type: int
  lease_ttl:
    description:
      - Seconds the journal lease of a run on the VM lasts, from 10 to 3600; unset means E(GPUPROV_LEASE_TTL), else
        120. A run holds it while it works on the VM and renews it every third of this; another run on the VM is
        refused meanwhile, naming the holder and when its lease expires.
      - A run killed elsewhere (an AWX node lost) blocks the VM until its lease expires, by the PostgreSQL server's
        clock (the controllers' for SQLite); one killed on this host is taken over at once. A shorter lease frees
        the VM sooner, for more journal writes.
    type: int
"""

    # The VM settings, for a member that only accepts them.
    VM_SETTINGS_IGNORED = r"""
options:
  journal:
    description: Shared by the module_defaults group; ignored by this module.
    type: path
  journal_password:
    description: Shared by the module_defaults group; ignored by this module.
    type: str
  ssh_key:
    description: Shared by the module_defaults group; ignored by this module.
    type: path
  ssh_user:
    description: Shared by the module_defaults group; ignored by this module.
    type: str
  boot_timeout:
    description: Shared by the module_defaults group (the boot timeout of M(gpuprov.cloud.vm)); ignored by this module.
    type: int
  ssh_timeout:
    description: Shared by the module_defaults group (the SSH timeout of M(gpuprov.cloud.vm)); ignored by this module.
    type: int
  teardown_timeout:
    description:
      - Shared by the module_defaults group (the teardown timeout of M(gpuprov.cloud.vm)); ignored by this module.
    type: int
  lease_ttl:
    description:
      - Shared by the module_defaults group (the journal lease of M(gpuprov.cloud.vm)); ignored by this module.
    type: int
"""

    # The cloud choice, the clouds' options and the request, for a member that calls no cloud.
    CLOUD_IGNORED = r"""
options:
  clouds:
    description: Shared by the module_defaults group; ignored by this module.
    type: list
    elements: str
  cloud_options:
    description:
      - Shared by the module_defaults group; ignored by this module, which calls no cloud.
      - It is checked all the same, as every member checks it (an unknown cloud or option fails, naming it). Each
        cloud's options are on its page, C(docs/clouds/<cloud>.md) of the collection.
    type: dict
    default: {}
  cloud:
    description: Shared by the module_defaults group; ignored by this module.
    type: str
  gpu:
    description: Shared by the module_defaults group; ignored by this module.
    type: str
  gpu_count:
    description: Shared by the module_defaults group; ignored by this module.
    type: int
    default: 1
  regions:
    description: Shared by the module_defaults group; ignored by this module.
    type: list
    elements: str
    default: []
  spot:
    description: Shared by the module_defaults group; ignored by this module.
    type: bool
    default: false
  prefer:
    description: Shared by the module_defaults group; ignored by this module.
    type: str
    choices: [order, price]
    default: order
  max_price_per_hour:
    description: Shared by the module_defaults group; ignored by this module.
    type: float
"""
