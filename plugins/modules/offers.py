#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: offers
short_description: List the offers a VM launch would try
version_added: 0.1.0
description:
  - Calls each cloud adapter's C(plan) primitive for the request, in the order of O(clouds), and returns every
    offer (cloud, region, zone, instance type, GPUs, price per hour, spot) with whether it is available and, when it
    is not, why.
  - A dry run of the search of M(gpuprov.cloud.vm), which walks the available offers in the order of their
    RV(offers[].rank) and skips the others.
  - Never creates or changes anything; some clouds answer C(plan) from a static catalogue, others read live
    listings (for example the zones that offer a machine type).
  - Each cloud's credentials are checked first, as M(gpuprov.cloud.vm) checks them, locally (the options and
    environment variables that carry them, the SDK's own files), and where the cloud's C(plan) makes no call (aws),
    with one read-only call (STS GetCallerIdentity). A cloud whose credentials are missing or refused is reported in
    RV(errors) with the message naming the option and variable to set; its offers, where it still plans them, are
    listed unavailable with that reason.
  - Another cloud that cannot plan is reported in RV(errors) and its offers are left out; the task fails only when
    every cloud is in RV(errors).
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.provider
  - gpuprov.cloud.provider.search
  - gpuprov.cloud.provider.request
  - gpuprov.cloud.group
  - gpuprov.cloud.group.vm_settings_ignored
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller.in_process_on_controller
attributes:
  check_mode:
    support: full
    details: Planning changes nothing; the module does the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  name:
    description:
      - The VM name the plan is made for (a DNS label); only checked, plans do not depend on it.
    type: str
    default: offers
seealso:
  - module: gpuprov.cloud.vm
  - module: gpuprov.cloud.instance
"""

EXAMPLES = r"""
- name: What would an H100 launch try on AWS and GCP?
  gpuprov.cloud.offers:
    clouds: [aws, gcp]
    gpu: H100
    regions: [us-east-1, us-central1]
    cloud_options:
      gcp:
        project: my-project
  delegate_to: localhost
  register: h100

- name: Show the table
  ansible.builtin.debug:
    var: h100.table

- name: The cheapest available offer
  ansible.builtin.debug:
    msg: "{{ h100.offers | selectattr('available') | rejectattr('price_per_hour', 'none') | sort(attribute='price_per_hour') | first }}"

- name: A dry run of a price-ordered search under $3 an hour across the marketplaces
  gpuprov.cloud.offers:
    clouds: [lambda, runpod, primeintellect, verda]
    gpu: H100
    prefer: price
    max_price_per_hour: 3.0
  delegate_to: localhost
  register: cheap_h100

- name: Why each offer would be skipped
  ansible.builtin.debug:
    msg: "{{ cheap_h100.offers | rejectattr('rank') | map(attribute='skip_reason') | list }}"
"""

RETURN = r"""
offers:
  description:
    - Every planned offer, those a launch would try first, in the order it would try them (O(prefer)), then
      those it would skip (out of stock, or above O(max_price_per_hour)) with the reason.
  returned: success
  type: list
  elements: dict
  contains:
    rank:
      description: Place of the offer in a launch's search (1 = tried first); null when a launch would skip it.
      type: int
      returned: always
      sample: 1
    offer_id:
      description: The offer's id (cloud, region, type, zone).
      type: str
      returned: always
      sample: aws:us-east-1:p5.48xlarge
    cloud: {description: Cloud., type: str, returned: always, sample: aws}
    region: {description: Region., type: str, returned: always, sample: us-east-1}
    zone: {description: "Zone, where the offer names one.", type: str, returned: always, sample: us-central1-a}
    instance_type: {description: Instance or machine type., type: str, returned: always, sample: p5.48xlarge}
    gpu: {description: "GPU model; null for no GPU.", type: str, returned: always, sample: H100}
    gpu_count: {description: GPUs per instance., type: int, returned: always, sample: 8}
    price_per_hour: {description: "On-demand USD per hour where known, else null.", type: float, returned: always}
    spot: {description: Whether it is spot / preemptible capacity., type: bool, returned: always}
    available: {description: "Whether the cloud has capacity for it now (its live stock, where it reports one).",
                type: bool, returned: always}
    unavailable_reason: {description: "The cloud's reason it is out of stock; null when available.", type: str,
                         returned: always}
    skip_reason:
      description: "Why a launch would skip it: the cloud's out-of-stock reason, or a price above
        O(max_price_per_hour); null when a launch would try it."
      type: str
      returned: always
      sample: "$3.29/h is above max_price_per_hour $2"
    detail: {description: "Adapter-specific facts (vCPUs, memory, accelerator type...).", type: dict, returned: always}
available:
  description: Number of offers a launch would try.
  returned: success
  type: int
clouds:
  description: Per cloud, how many offers it planned, how many are available, and its error if it could not plan.
  returned: always
  type: list
  elements: dict
errors:
  description: Clouds that could not plan or whose credentials are missing or refused, each with C(cloud),
    C(kind), C(msg), C(block) and C(primitive) (V(load), V(credentials) or V(plan)).
  returned: always
  type: list
  elements: dict
table:
  description: A printable table of the offers.
  returned: always
  type: list
  elements: str
  sample:
    - "#  CLOUD  REGION  ZONE  TYPE  GPU  $/H   AVAILABLE"
    - "1  local  local   -     sshd  -    0.00  yes"
error:
  description: The classified error (C(kind), C(msg), C(block), C(primitive), C(location)) when the task failed on one.
  returned: failure
  type: dict
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.journal_module import JournalModule
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.primitive_tasks import OFFERS, finish


def main():
    module = JournalModule(argument_spec=OFFERS.argument_spec, supports_check_mode=True)
    finish(module, OFFERS)


if __name__ == "__main__":
    main()
