# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Written by scripts/gen-cloud-options-doc.py from the adapters' option declarations
# (plugins/module_utils/providers/cloud_options/); edit those, then run the script.

from __future__ import annotations


class ModuleDocFragment:
    """The O(cloud_options) of every module of the collection: each cloud's adapter options."""

    DOCUMENTATION = r"""
options:
  cloud_options:
    description:
    - 'Adapter options per cloud, keyed by cloud name: the same dict for every module of the collection (play
      variable C(gpuprov_cloud_options) in its playbooks).'
    - Each cloud takes only the options listed for it; an unknown option or a value of the wrong type fails
      the task, naming it.
    - Credentials (the options marked never logged) are hidden wherever they would show. The other options
      are journalled with the VM, so that a later teardown reaches it where it was made.
    - An option left unset is read from the environment where its description names a variable (as AWX's credential
      types and the vendors' command line tools set them).
    type: dict
    default: {}
    suboptions:
      aws:
        description: 'The V(aws) cloud: Amazon EC2, through boto3.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source addresses (CIDRs) allowed to reach the instance when the task names none.
              Unset: this controller''s public address (/32), as C(controller_ip_url) reports it. V(0.0.0.0/0)
              is used only when given explicitly.'
            type: list
            elements: str
          ami_id:
            description: 'Image to boot: an AMI id, or a mapping of region to AMI id.'
            type: raw
          ami_name_filter:
            description: Image name pattern of the DescribeImages fallback.
            type: str
          ami_owners:
            description: Image owners of the DescribeImages fallback.
            type: list
            elements: str
          ami_ssm_parameter:
            description: 'SSM parameter holding the image id; V('''') skips SSM. Default: the Deep Learning
              Base OSS Nvidia Driver (Ubuntu 22.04) parameter for GPU types, Canonical''s Ubuntu 22.04 for
              CPU types.'
            type: str
          aws_access_key_id:
            description:
            - 'Access key id. Not used when C(profile) is set. Unset (here and in the environment): boto3''s
              chain (shared files, SSO, container and instance metadata).'
            - Never logged.
            - When not set, read from E(AWS_ACCESS_KEY_ID).
            type: str
          aws_secret_access_key:
            description:
            - Secret access key of C(aws_access_key_id).
            - Never logged.
            - When not set, read from E(AWS_SECRET_ACCESS_KEY).
            type: str
          aws_session_token:
            description:
            - Session token of temporary credentials.
            - Never logged.
            - When not set, read from E(AWS_SESSION_TOKEN), else E(AWS_SECURITY_TOKEN).
            type: str
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          controller_ip_url:
            description: Where to ask this controller's public address when no CIDR is given; V('') disables
              the lookup (C(allowed_cidrs) is then required).
            type: str
            default: https://checkip.amazonaws.com
          endpoint_url:
            description:
            - API endpoint of every client (a test server, a VPC endpoint).
            - When not set, read from E(AWS_ENDPOINT_URL).
            type: str
          k3s_direct:
            description: Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access
              C(Direct); V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel.
            type: bool
            default: false
          poll_interval_s:
            description:
            - Seconds between two observations of a booting or leaving instance.
            - At least 0.
            type: float
            default: 10
          profile:
            description:
            - A profile of the shared AWS files (C(~/.aws/config), C(~/.aws/credentials)); it wins over the
              key options.
            - When not set, read from E(AWS_PROFILE).
            type: str
          regions:
            description: 'Regions to search, in order, when the request names none (the module''s C(regions)
              wins). Default: the large US regions, then the large EU ones (the adapter''s catalog). E(AWS_REGION)
              is not read: this is a search order, not one region.'
            type: list
            elements: str
            aliases:
            - region
          ssh_user:
            description: 'The login user made or used on the instance, when the task names none. Unset: V(ubuntu),
              the default images'' user.'
            type: str
      docker:
        description: 'The V(docker) test cloud: each VM is a container running sshd on a Docker engine.'
        type: dict
        suboptions:
          base_image:
            description: Image the sshd image is built FROM; it must have openssh-server (the default one
              is made offline by the collection's C(scripts/build-base-image.sh)).
            type: str
            default: gpuprov/debian-base:bookworm
          build_timeout:
            description:
            - Timeout of the sshd image build.
            - At least 0.
            type: float
            default: 600
          docker_host:
            description:
            - 'The Docker engine''s address (V(unix:///var/run/docker.sock), V(tcp://host:2376)). Unset (here
              and in the environment): the default socket.'
            - When not set, read from E(DOCKER_HOST).
            type: str
          image:
            description: 'Tag of the sshd image. Unset: derived from the Dockerfile and the base image id.'
            type: str
          init:
            description: Run a tiny init as PID 1 (docker run --init), which reaps the boot script's orphans.
            type: bool
            default: true
          privileged:
            description: Run the containers privileged, which k3s needs (the cloud can host k3s only then).
            type: bool
            default: false
          privileged_cap_drop:
            description: 'With C(privileged): capabilities the engine''s host lacks (for example V(SYS_RESOURCE)
              on a nested engine where C(--privileged) fails with ''unable to apply caps''). The containers
              then get every other capability and no seccomp or AppArmor confinement instead.'
            type: list
            elements: str
          publish_host:
            description: Host address port 22 is published on.
            type: str
            default: 127.0.0.1
          python_interpreter:
            description: The Python Ansible uses in the container.
            type: str
            default: /usr/bin/python3
          ssh_host:
            description: 'Host of the SSH endpoint. Unset: C(publish_host), or V(127.0.0.1) when publishing
              on all addresses.'
            type: str
          ssh_port:
            description:
            - 'A fixed host port for SSH. Unset: Docker picks a free one.'
            - At least 1.
            type: int
          timeout:
            description:
            - Timeout of each Docker API call.
            - At least 0.
            type: float
            default: 60
      gcp:
        description: 'The V(gcp) cloud: Google Compute Engine, through google-cloud-compute.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source ranges of the VM''s firewall rule when the task names none. Required one
              way or the other: gcp never opens V(0.0.0.0/0) by default.'
            type: list
            elements: str
          api_endpoint:
            description: Base URL of the Compute API (default https://compute.googleapis.com); an http://127.0.0.1:port
              URL points the SDK at a fake.
            type: str
          boot_script_via:
            description: 'How the boot script is delivered: V(cloud-init) user data (run once per instance)
              or the guest agent''s V(startup-script) (every boot; for images without cloud-init).'
            type: str
            choices:
            - cloud-init
            - startup-script
            default: cloud-init
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          credentials_file:
            description:
            - 'A service-account JSON key file. Unset (here and in the environment): Application Default Credentials
              (E(GOOGLE_APPLICATION_CREDENTIALS), C(gcloud auth application-default login), the metadata server),
              or anonymous credentials when C(api_endpoint) is set.'
            - Never logged.
            - When not set, read from E(GCP_SERVICE_ACCOUNT_FILE), else E(GCE_CREDENTIALS_FILE_PATH).
            type: path
          disk_size_gb:
            description:
            - Boot disk size in GB.
            - At least 10.
            type: int
            default: 100
          image_family:
            description: 'Boot image family. Default: ubuntu-accelerator-2204-amd64-with-nvidia-550 for GPU
              offers, ubuntu-2204-lts for CPU offers.'
            type: str
          image_project:
            description: 'Project of the boot image family. Default: ubuntu-os-accelerator-images for GPU
              offers (NVIDIA driver preinstalled), ubuntu-os-cloud for CPU offers.'
            type: str
          k3s_direct:
            description: Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access
              C(Direct); V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel.
            type: bool
            default: true
          network:
            description: The VPC network of the instance and its rule.
            type: str
            default: default
          operation_timeout_s:
            description:
            - Bound of the one operation wait create makes.
            - At least 0.
            type: float
            default: 120
          poll_interval_s:
            description:
            - Seconds between two observations of a booting or leaving instance.
            - At least 0.
            type: float
            default: 10
          project:
            description:
            - The GCP project id. Required, here or in the environment.
            - When not set, read from E(GCP_PROJECT), else E(GCE_PROJECT).
            type: str
          read_retry_s:
            description:
            - Total time the SDK may retry a read that got 503/504; V(0) turns SDK retries off. Writes are
              never retried by the SDK.
            - At least 0.
            type: float
            default: 20
          regions:
            description: 'Regions to search, in order, when the request names none (the module''s C(regions)
              wins). Default: the GPU-rich regions of the adapter''s catalog, US first.'
            type: list
            elements: str
          request_timeout_s:
            description:
            - Timeout of every other API request.
            - At least 0.
            type: float
            default: 60
          ssh_user:
            description: 'The login user made or used on the instance, when the task names none. Unset: V(gpuprov).'
            type: str
          zones:
            description: Only these zones are searched.
            type: list
            elements: str
      local:
        description: 'The V(local) cloud: each VM is an sshd on a loopback port of the controller; no credentials.'
        type: dict
        suboptions:
          python_interpreter:
            description: 'The Python Ansible uses on the instance. Unset: the controller''s own.'
            type: str
          root:
            description: 'Folder of the instances'' state. Unset: C(<state dir>/local).'
            type: path
          sshd:
            description: 'The OpenSSH server binary. Unset: C(sshd) on the PATH, else C(/usr/sbin/sshd).'
            type: path
          user:
            description: 'The login user; it must be the user running the controller''s tasks or one sshd
              may switch to. Unset: the current user.'
            type: str
"""
