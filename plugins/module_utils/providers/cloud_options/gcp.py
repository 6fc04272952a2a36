# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the gcp adapter (``cloud_options.gcp``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import SDK_READ_RETRY_S

# What the documentation says of the cloud, above its options.
DESCRIPTION = "The V(gcp) cloud: Google Compute Engine, through google-cloud-compute."

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Labels the instance and its boot disk (firewall rules take no labels). GCP's label rules apply: names "
        "and values are lower-cased, and a name or value that still breaks them (a name starts with a letter; "
        "both at most 63 letters, digits, C(_) and C(-)), or two names that differ only in case, is refused "
        "before any call, naming it. The labels of a VM that is already there are changed in place; GCP applies "
        "them when its operations end, and a run that finds them not applied yet sets them again.")

OPTIONS = dict(
    project=dict(
        type="str", fallback=shared.from_environment("GCP_PROJECT", "GCE_PROJECT"),
        description="The GCP project id. Required, here or in the environment."),
    credentials_file=dict(
        type="path", no_log=True,
        fallback=shared.from_environment("GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH"),
        description="A service-account JSON key file. Unset (here and in the environment): Application Default "
                    "Credentials (E(GOOGLE_APPLICATION_CREDENTIALS), C(gcloud auth application-default login), "
                    "the metadata server), or anonymous credentials when C(api_endpoint) is set."),
    api_endpoint=dict(
        type="str", description="Base URL of the Compute API (default https://compute.googleapis.com); an "
                                "http://127.0.0.1:port URL points the SDK at a fake."),
    regions=dict(shared.REGIONS, description=(
        "Regions to search, in order, when the request names none (the module's C(regions) wins). Default: "
        "the GPU-rich regions of the adapter's catalog, US first.")),
    zones=dict(type="list", elements="str", description="Only these zones are searched."),
    image_project=dict(
        type="str", description="Project of the boot image family. Default: ubuntu-os-accelerator-images for GPU "
                                "offers (NVIDIA driver preinstalled), ubuntu-os-cloud for CPU offers."),
    image_family=dict(
        type="str", description="Boot image family. Default: for GPU offers the Ubuntu accelerator family of the "
                                "newest NVIDIA driver branch that runs the GPU's generation (now "
                                "ubuntu-accelerator-2204-amd64-with-nvidia-580; the B200 needs R570 or later), "
                                "ubuntu-2204-lts for CPU offers. A family whose name gives a driver branch that "
                                "cannot run the GPU is refused."),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source ranges of the VM's firewall rule when the task names none. Required one way or the other: gcp "
        "never opens V(0.0.0.0/0) by default.")),
    k3s_direct=shared.k3s_direct(True),
    ssh_user=shared.ssh_user("V(gpuprov)"),
    network=dict(type="str", default="default", description="The VPC network of the instance and its rule."),
    disk_size_gb=dict(type="int", default=100, minimum=10, description="Boot disk size in GB."),
    boot_script_via=dict(
        type="str", default="cloud-init", choices=["cloud-init", "startup-script"],
        description="How the boot script is delivered: V(cloud-init) user data (run once per instance) or the "
                    "guest agent's V(startup-script) (every boot; for images without cloud-init)."),
    operation_timeout_s=shared.seconds(120, "Client-side bound of the one operation wait that create (after "
                                            "C(instances.insert)) and prepare (after a firewall insert or patch) make; "
                                            "the server answers that wait within about two minutes. An operation "
                                            "still running after it is a transient failure: gpuprov observes, then "
                                            "retries."),
    request_timeout_s=shared.seconds(60, "Timeout of every other API request."),
    read_retry_s=shared.seconds(20, "Total time the SDK may retry a read that got 503/504; V(0) turns SDK retries "
                                    "off. Writes are never retried by the SDK; gpuprov's own retries, with their "
                                    "backoff and budget, come on top.", maximum=SDK_READ_RETRY_S),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

# The project and the credentials every call needs (Application Default Credentials where no key file is given).
CREDENTIALS = shared.Credentials(
    "gcp", OPTIONS, sets=[("credentials_file",)], required=("project",),
    environment=("GOOGLE_APPLICATION_CREDENTIALS",),
    files=("~/.config/gcloud/application_default_credentials.json",),
    also=("run gcloud auth application-default login",))
