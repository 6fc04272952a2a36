# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Cloud and credential options of the modules that call provider primitives.

    The argument spec that matches these lives in module_utils/provider_args.py.
    Use C(gpuprov.cloud.provider) (adapter options and credentials) together with
    one of the variants: C(gpuprov.cloud.provider.modules) (one O(cloud)),
    C(gpuprov.cloud.provider.search) (O(clouds), a search order), and
    C(gpuprov.cloud.provider.request) (what is asked for).
    """

    # Adapter options and the credential chains, shared by every variant.
    DOCUMENTATION = r"""
options:
  cloud_options:
    description:
      - Per-cloud adapter options, keyed by cloud name, the same dict that M(gpuprov.cloud.vm) takes (play variable
        C(gpuprov_cloud_options) in the collection's playbooks). Never logged.
      - V(aws) takes C(aws_access_key_id), C(aws_secret_access_key), C(aws_session_token), C(profile),
        C(endpoint_url), C(regions), C(ami_id), C(allowed_cidrs), C(ssh_user), C(k3s_direct).
      - V(gcp) takes C(project) (required), C(credentials_file), C(api_endpoint), C(regions), C(zones),
        C(image_project), C(image_family), C(allowed_cidrs), C(ssh_user), C(k3s_direct).
      - V(docker) takes C(docker_host), C(base_image), C(publish_host), C(privileged).
      - V(local) takes C(root) (default C(<state dir>/local)) and C(sshd).
      - Keys name clouds; a key that is not a known cloud is an error.
    type: dict
    default: {}
notes:
  - Credentials come from O(cloud_options) when given there, else from each cloud's standard chain. V(aws) uses
    boto3's chain; E(AWS_ACCESS_KEY_ID), E(AWS_SECRET_ACCESS_KEY) and E(AWS_SESSION_TOKEN), E(AWS_PROFILE), the
    shared files C(~/.aws/credentials) and C(~/.aws/config) (SSO included), then container and instance metadata;
    E(AWS_ENDPOINT_URL) is honoured when C(endpoint_url) is not set.
    V(gcp) uses C(credentials_file) (a service-account JSON key), else Application Default Credentials;
    E(GOOGLE_APPLICATION_CREDENTIALS), C(gcloud auth application-default login), then the metadata server.
    V(docker) uses C(docker_host), else E(DOCKER_HOST), else the default socket. V(local) needs none.
  - The state directory (for the V(local) cloud's instances and the collection's SSH key) is E(GPUPROV_HOME),
    else C($XDG_STATE_HOME/gpuprov), else C(~/.local/state/gpuprov).
  - "A classified cloud error fails the task with C(msg) set to C(<kind>: <message>), the kind being one of
    C(Transient), C(Capacity), C(Quota), C(Unavailable), C(Failed), C(InvalidRequest) or C(Credentials)."
  - "Run these modules on the controller (C(hosts: localhost) or C(delegate_to: localhost)); the cloud SDKs must
    be installed for the Python that runs them (C(pip install -r requirements.txt) from the collection)."
requirements:
  - python >= 3.11
  - boto3 (for V(aws))
  - google-cloud-compute (for V(gcp))
  - docker (for V(docker))
  - cryptography (for the collection's SSH key and the V(local) cloud)
"""

    # One cloud (instance, instance_info).
    MODULES = r"""
options:
  cloud:
    description:
      - The cloud whose primitives to call, for example V(aws), V(gcp), V(docker) or V(local).
      - The V(local) cloud runs each instance as an C(sshd) on a loopback port and needs no credentials.
    type: str
    default: local
"""

    # A search order (offers).
    SEARCH = r"""
options:
  clouds:
    description:
      - Clouds to plan on, in order of preference, as in M(gpuprov.cloud.vm).
    type: list
    elements: str
    default: [local]
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
    description: Regions to plan in; empty means each cloud's documented default list.
    type: list
    elements: str
    default: []
  spot:
    description: Ask for spot / preemptible capacity where the cloud has it.
    type: bool
    default: false
"""
