# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Cloud choice, request and credentials of the modules that call provider primitives.

    The argument specs that match these live in module_utils/provider_args.py. Use
    C(gpuprov.cloud.provider) (credentials, requirements) with C(gpuprov.cloud.cloud_options)
    (each cloud's options, generated), one of C(gpuprov.cloud.provider.modules) (one cloud)
    and C(gpuprov.cloud.provider.search) (a search order), and C(gpuprov.cloud.provider.request).
    """

    # Where credentials come from, and what the modules need; shared by every variant.
    DOCUMENTATION = r"""
options: {}
notes:
  - Credentials come from O(cloud_options), else from the environment variables or files its cloud's page names
    (C(docs/clouds/<cloud>.md)); V(local) needs none.
  - Each cloud used needs its packages for the Python that runs the task, C(<collection>/requirements/<cloud>.txt)
    (C(docs/install.md)); a missing one fails the task with the command that installs it.
  - "A classified cloud error fails the task with C(msg) set to C(<kind>: <message>), the kind being C(Transient),
    C(Capacity), C(Quota), C(Unavailable), C(Failed), C(InvalidRequest) or C(Credentials)."
  - The state directory is E(GPUPROV_HOME), else C($XDG_STATE_HOME/gpuprov), else C(~/.local/state/gpuprov).
requirements:
  - python >= 3.11
  - boto3 (C(requirements/aws.txt))
  - google-cloud-compute (C(requirements/gcp.txt))
  - docker (C(requirements/docker.txt))
  - requests (C(requirements/<cloud>.txt) of V(lambda) V(runpod) V(primeintellect) V(verda) V(massedcompute)
    V(hyperstack) V(digitalocean))
  - nebius (C(requirements/nebius.txt))
"""

    # One cloud (instance, instance_info).
    MODULES = r"""
options:
  cloud:
    description:
      - The cloud to call, for example V(aws) or V(local) (an C(sshd) on a loopback port); unset means the first of
        O(clouds), else V(local).
    type: str
  clouds:
    description:
      - A search order shared with M(gpuprov.cloud.vm) (through module_defaults); here only its first cloud counts,
        when O(cloud) is unset.
    type: list
    elements: str
"""

    # A search order (vm, offers).
    SEARCH = r"""
options:
  clouds:
    description: Clouds to search, in order of preference. Unset means O(cloud), else V(local).
    type: list
    elements: str
  cloud:
    description:
      - One cloud to search, when O(clouds) is unset (as M(gpuprov.cloud.instance) takes it, so one
        module_defaults entry serves both).
    type: str
"""

    # What is asked for (every variant).
    REQUEST = r"""
options:
  gpu:
    description: The GPU model, for example V(H100), V(A100-80GB), V(L4). Unset or V(none) asks for no GPU.
    type: str
  gpu_count:
    description: Number of GPUs; at least 1.
    type: int
    default: 1
  regions:
    description:
      - Regions to plan in, each cloud in those it has (one with none refuses); empty means each cloud's own.
    type: list
    elements: str
    default: []
  spot:
    description: Ask for spot / preemptible capacity where the cloud has it.
    type: bool
    default: false
  prefer:
    description:
      - V(order) tries offers in the order of O(clouds) (then each cloud's own); V(price) tries all offers cheapest
        first, those without a price (spot on V(aws) and V(gcp)) last.
    type: str
    choices: [order, price]
    default: order
  max_price_per_hour:
    description:
      - Skip offers dearer than this many US dollars per hour for the instance, or without a price; unset means no
        limit.
    type: float
"""

    # The user's tags (vm, instance): the modules that make resources.
    TAGS = r"""
options:
  tags:
    description:
      - Tags for cost allocation (C(team), C(cost-center)) on each resource made for the VM where its cloud takes
        tags or labels (C(docs/clouds/<cloud>.md) says which and its rules); values become strings. The identity
        tags (C(gpuprov-vm-name), C(gpuprov-journal-id)) win; a name starting C(gpuprov-), or a tag the cloud
        cannot hold, is refused first.
    type: dict
"""
