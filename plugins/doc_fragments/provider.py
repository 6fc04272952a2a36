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
  - Credentials come from O(cloud_options), else from the environment variables or the files its cloud's page
    names (C(docs/clouds/<cloud>.md)). V(local) needs none.
  - The state directory (for the V(local) cloud's instances and the collection's SSH key) is E(GPUPROV_HOME),
    else C($XDG_STATE_HOME/gpuprov), else C(~/.local/state/gpuprov).
  - "A classified cloud error fails the task with C(msg) set to C(<kind>: <message>), the kind being one of
    C(Transient), C(Capacity), C(Quota), C(Unavailable), C(Failed), C(InvalidRequest) or C(Credentials)."
  - "The modules that call a cloud run on the controller (M(gpuprov.cloud.vm) always does; run the others with
    C(hosts: localhost) or C(delegate_to: localhost)); each cloud's packages must be installed for the Python that
    runs them: C(pip install -r <collection>/requirements/<cloud>.txt) for each cloud used, or
    C(<collection>/requirements.txt) for all, C(<collection>) being where the collection is installed (for
    example C(~/.ansible/collections/ansible_collections/gpuprov/cloud)). A missing package fails the task with
    the exact command."
requirements:
  - python >= 3.11
  - boto3 (for V(aws); C(requirements/aws.txt) of the collection)
  - google-cloud-compute (for V(gcp); C(requirements/gcp.txt))
  - docker (for V(docker); C(requirements/docker.txt))
  - requests (for V(lambda) V(runpod) V(primeintellect) V(verda) V(massedcompute) V(hyperstack) and
    V(digitalocean); their C(requirements/<cloud>.txt))
  - nebius (for V(nebius); C(requirements/nebius.txt))
"""

    # One cloud (instance, instance_info).
    MODULES = r"""
options:
  cloud:
    description:
      - The cloud whose primitives to call, for example V(aws), V(gcp), V(docker) or V(local).
      - Unset means the first of O(clouds), else V(local).
      - The V(local) cloud runs each instance as an C(sshd) on a loopback port and needs no credentials.
    type: str
  clouds:
    description:
      - A search order, shared with M(gpuprov.cloud.vm) and M(gpuprov.cloud.offers) (for example through the
        C(group/gpuprov.cloud.gpuprov) module_defaults group). Here only its first cloud counts, and only when
        O(cloud) is unset.
    type: list
    elements: str
"""

    # A search order (vm, offers).
    SEARCH = r"""
options:
  clouds:
    description:
      - Clouds to search, in order of preference. The V(local) cloud runs each VM as an C(sshd) on a loopback port.
      - Unset means the one cloud of O(cloud), else V(local).
    type: list
    elements: str
  cloud:
    description:
      - One cloud to search, when O(clouds) is unset. It is the option M(gpuprov.cloud.instance) and
        M(gpuprov.cloud.instance_info) take, so that one module_defaults group entry serves every module.
    type: str
"""

    # What is asked for (every variant).
    REQUEST = r"""
options:
  gpu:
    description:
      - The GPU model, for example V(H100), V(A100-80GB), V(L4). Unset or V(none) asks for no GPU.
    type: str
  gpu_count:
    description: Number of GPUs; at least 1.
    type: int
    default: 1
  regions:
    description:
      - Regions to plan in; empty means each cloud's documented default list.
      - The list is shared by the clouds of O(clouds); each plans in those it has and leaves the others out.
        A cloud that has none of them (a typo, or only other clouds' regions) refuses the request when it plans
        (InvalidRequest naming the requested regions and the ones it has) and nothing is made there; the task
        fails when no cloud can plan.
    type: list
    elements: str
    default: []
  spot:
    description: Ask for spot / preemptible capacity where the cloud has it.
    type: bool
    default: false
  prefer:
    description:
      - The order in which offers are tried.
      - V(order) keeps the order of O(clouds) (and each cloud's own order, cheapest first on the marketplace
        clouds).
      - V(price) orders the offers of every cloud together by hourly price, cheapest first; offers whose cloud
        reports no price (spot offers on V(aws) and V(gcp)) come last.
    type: str
    choices: [order, price]
    default: order
  max_price_per_hour:
    description:
      - Skip offers dearer than this many US dollars per hour (for the whole instance), and offers whose cloud
        reports no price. Skipped offers are listed with the reason (M(gpuprov.cloud.offers), the search history).
      - Unset means no limit.
    type: float
"""

    # The user's tags (vm, instance): the modules that make resources.
    TAGS = r"""
options:
  tags:
    description:
      - Tags for cost allocation, on every resource gpuprov makes for the VM where the cloud takes tags or labels,
        for example a C(team) and a C(cost-center) tag. Values are strings; numbers and booleans become strings.
      - What each cloud tags, and its rules for names and values, is on its page (C(docs/clouds/<cloud>.md));
        V(runpod), V(primeintellect), V(verda) and V(massedcompute) take no tags and ignore them.
      - They are merged with gpuprov's identity tags, C(gpuprov-vm-name) and C(gpuprov-journal-id), which every
        resource carries and which always win. A name starting with C(gpuprov-), or a tag the cloud cannot hold,
        is refused before any call, naming it. Every tag list sent to a cloud names each tag once.
    type: dict
"""
