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
  - In the module_defaults group C(group/gpuprov.cloud.gpuprov), it accepts every option the group shares and
    ignores those it has no use for, as their descriptions say.
"""

    # The VM settings as the vm module uses them.
    VM_SETTINGS = r"""
options:
  journal:
    description:
      - An SQLite path (made 0600; C(~) and C($VAR) expanded) or a C(postgresql://) DSN (taken as written; shared
        by every controller that names it). Unset means E(GPUPROV_JOURNAL), else C(<state dir>/journal.sqlite).
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, unless the DSN or libpq's environment (E(PGPASSWORD), E(PGPASSFILE))
        gives it. Never logged or shown.
    type: str
  ssh_key:
    description:
      - Private key to log in with; unset means E(GPUPROV_SSH_KEY_FILE), else the task's
        C(ansible_ssh_private_key_file) (an AWX Machine credential), else C(<state dir>/id_ed25519), made on first
        use. Another key than the VM's is refused first; O(state=absent) needs none.
    type: path
  ssh_user:
    description: Login user where the cloud does not dictate one (the image default otherwise).
    type: str
  boot_timeout:
    description: Seconds an instance may take to be Running with an SSH endpoint; unset means the cloud's own.
    type: int
  ssh_timeout:
    description: Seconds to wait for an SSH login once the instance is Running; unset means 300.
    type: int
  teardown_timeout:
    description: Seconds instances may take to be gone before the teardown is Leaked; unset means 600.
    type: int
  lease_ttl:
    description:
      - Seconds (10 to 3600; unset E(GPUPROV_LEASE_TTL), else 120) a run's lease on the VM lasts, renewed
        every third of it; a run killed elsewhere blocks the VM that long.
    type: int
"""

    # The VM settings, for a member that only accepts them.
    VM_SETTINGS_IGNORED = r"""
options:
  journal:
    description: Ignored; shared by the module_defaults group.
    type: str
  journal_password:
    description: Ignored; shared by the module_defaults group.
    type: str
  ssh_key:
    description: Ignored; shared by the module_defaults group.
    type: path
  ssh_user:
    description: Ignored; shared by the module_defaults group.
    type: str
  boot_timeout:
    description: Ignored; shared by the module_defaults group.
    type: int
  ssh_timeout:
    description: Ignored; shared by the module_defaults group.
    type: int
  teardown_timeout:
    description: Ignored; shared by the module_defaults group.
    type: int
  lease_ttl:
    description: Ignored; shared by the module_defaults group.
    type: int
"""

    # The cloud choice, the clouds' options and the request, for a member that calls no cloud.
    CLOUD_IGNORED = r"""
options:
  clouds:
    description: Ignored; shared by the module_defaults group.
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
    description: Ignored; shared by the module_defaults group.
    type: str
  gpu:
    description: Ignored; shared by the module_defaults group.
    type: str
  gpu_count:
    description: Ignored; shared by the module_defaults group.
    type: int
    default: 1
  regions:
    description: Ignored; shared by the module_defaults group.
    type: list
    elements: str
    default: []
  spot:
    description: Ignored; shared by the module_defaults group.
    type: bool
    default: false
  prefer:
    description: Ignored; shared by the module_defaults group.
    type: str
    choices: [order, price]
    default: order
  max_price_per_hour:
    description: Ignored; shared by the module_defaults group.
    type: float
"""
