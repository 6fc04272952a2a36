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
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
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
      digitalocean:
        description: 'The V(digitalocean) cloud: DigitalOcean GPU Droplets, through its REST API v2. A boot
          script runs as user data; each VM gets its own cloud firewall (attached through a tag) letting in
          only the allowed addresses; the droplet''s tags carry its identity.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source addresses of the VM''s cloud firewall when the task names none. Required
              one way or the other: digitalocean never opens V(0.0.0.0/0) by default.'
            type: list
            elements: str
          api_key:
            description:
            - DigitalOcean API token (a personal access token; a custom-scoped one needs the droplet, ssh_key,
              firewall, tag, sizes and regions scopes), sent as a bearer token.
            - Never logged.
            - When not set, read from E(DIGITALOCEAN_TOKEN), else E(DIGITALOCEAN_ACCESS_TOKEN), else E(DO_API_TOKEN),
              else E(DO_API_KEY), else E(DO_OAUTH_TOKEN).
            type: str
            aliases:
            - api_token
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://api.digitalocean.com/v2
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          cpu_sizes:
            description: The sizes offered when the request asks for no GPU (DigitalOcean lists well over
              a hundred CPU sizes; these are the ones worth a VM).
            type: list
            elements: str
            default:
            - s-2vcpu-4gb
            - s-4vcpu-8gb
          image:
            description: 'Image slug or id of new droplets. Unset: DigitalOcean''s AI/ML-ready GPU images,
              V(gpu-h100x1-base) for one NVIDIA GPU, V(gpu-h100x8-base) for eight, V(gpu-amd-base) for AMD
              GPUs, and V(ubuntu-24-04-x64) for a droplet without a GPU.'
            type: str
          k3s_direct:
            description: Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access
              C(Direct); V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel.
            type: bool
            default: false
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          python_interpreter:
            description: 'The Python Ansible uses on the droplet. Unset: Ansible''s interpreter discovery.'
            type: str
          regions:
            description: 'Region slugs to search, in order (for example V(nyc2), V(tor1), V(atl1)), when the
              request names none (the module''s C(regions) wins). Unset: every region where DigitalOcean lists
              the size as creatable.'
            type: list
            elements: str
          request_timeout_s:
            description:
            - Read timeout of every API request.
            - At least 0.
            type: float
            default: 60
          ssh_port:
            description:
            - The port sshd listens on, for an image whose sshd listens elsewhere than 22 (it is opened in
              the firewall too).
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: 'The login user the registered SSH key authorises: DigitalOcean embeds it in V(root)''s
              authorized keys; the adapter creates no user.'
            type: str
            default: root
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
            description: 'Boot image family. Default: for GPU offers the Ubuntu accelerator family of the
              newest NVIDIA driver branch that runs the GPU''s generation (now ubuntu-accelerator-2204-amd64-with-nvidia-580;
              the B200 needs R570 or later), ubuntu-2204-lts for CPU offers. A family whose name gives a driver
              branch that cannot run the GPU is refused.'
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
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
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
      hyperstack:
        description: 'The V(hyperstack) cloud: Hyperstack (NexGen Cloud) VMs, through its Infrahub REST API
          v1. Each region''s resources live in an environment V(gpuprov-<region>) made on first use and removed
          once empty; each VM carries its own security rules and a public IP; a boot script runs as cloud-init
          user data.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source ranges of the VM''s security rules when the task names none. Required one
              way or the other: hyperstack never opens V(0.0.0.0/0) by default, and without a rule SSH is
              closed.'
            type: list
            elements: str
          api_key:
            description:
            - 'Hyperstack API key, sent in the C(api_key) header (never logged). Unset: E(HYPERSTACK_API_KEY).'
            - Never logged.
            - When not set, read from E(HYPERSTACK_API_KEY).
            type: str
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://infrahub-api.nexgencloud.com/v1
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          image_name:
            description: The OS image (C(GET /core/images) lists a region's images). It must exist in the
              offer's region.
            type: str
            default: Ubuntu Server 22.04 LTS R535 CUDA 12.2
          k3s_direct:
            description: Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access
              C(Direct); V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel.
            type: bool
            default: false
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          python_interpreter:
            description: 'The Python Ansible uses on the instance. Unset: Ansible''s interpreter discovery.'
            type: str
          regions:
            description: 'Regions to search, in order, when the request names none (the module''s C(regions)
              wins), e.g. V(CANADA-1), V(NORWAY-1), V(US-1). Unset: every region whose flavors Hyperstack
              lists.'
            type: list
            elements: str
          request_timeout_s:
            description:
            - Read timeout of every API request.
            - At least 0.
            type: float
            default: 60
          ssh_port:
            description:
            - The port sshd listens on. VMs are made with port randomization off, so the public IP forwards
              it as it is; it is opened in the VM's security rules.
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: 'The login user of the image: V(ubuntu) on Hyperstack''s Ubuntu images; the task''s
              C(ssh_user) does not change it.'
            type: str
            default: ubuntu
      lambda:
        description: 'The V(lambda) cloud: Lambda Cloud (Lambda Labs) VMs, through its REST API v1. A boot
          script runs as cloud-init user data; each VM gets its own firewall ruleset.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source ranges of the VM''s firewall ruleset when the task names none. Required one
              way or the other: lambda never opens V(0.0.0.0/0) by default. IPv4 only (Lambda''s rules and
              instances are IPv4; IPv6 ranges are left out). The account''s global ruleset still applies on
              top.'
            type: list
            elements: str
          api_key:
            description:
            - 'Lambda Cloud API key, sent as a bearer token (never logged). Unset: E(LAMBDA_API_KEY).'
            - Never logged.
            - When not set, read from E(LAMBDA_API_KEY).
            type: str
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://cloud.lambda.ai/api/v1
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          firewall_unsupported_regions:
            description: 'Regions where Lambda applies no firewall rules (its docs name V(us-south-1)): no
              ruleset is made there and the VM is reachable as the account''s global rules allow.'
            type: list
            elements: str
            default:
            - us-south-1
          image_family:
            description: 'Boot image family (C(GET /images) lists them, e.g. V(lambda-stack-22-04)). Unset:
              Lambda''s default, the latest Lambda Stack image.'
            type: str
          image_id:
            description: Boot image id; exclusive with C(image_family).
            type: str
          k3s_direct:
            description: Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access
              C(Direct); V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel.
            type: bool
            default: false
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          python_interpreter:
            description: 'The Python Ansible uses on the instance. Unset: Ansible''s interpreter discovery
              (V(/usr/bin/python3) on Lambda''s Ubuntu images).'
            type: str
          regions:
            description: 'Regions to search, in order, when the request names none (the module''s C(regions)
              wins). Unset: every region that Lambda lists with capacity.'
            type: list
            elements: str
          request_timeout_s:
            description:
            - Read timeout of every API request.
            - At least 0.
            type: float
            default: 60
          ssh_port:
            description:
            - The port sshd listens on, for an image whose sshd listens elsewhere than 22 (it is opened in
              the firewall ruleset too).
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: The login user of the image. Lambda's images log in as V(ubuntu); the task's C(ssh_user)
              does not change it.
            type: str
            default: ubuntu
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
      massedcompute:
        description: 'The V(massedcompute) cloud: Massed Compute VMs, through its VM REST API v1. A boot script
          runs as the launch''s startup command (through sudo). Massed Compute has no firewall API: the VM''s
          ports are as Massed Compute leaves them, and C(allowed_cidrs) restricts nothing there.'
        type: dict
        suboptions:
          api_key:
            description:
            - 'Massed Compute API key (a full-access key: read-only keys cannot launch), sent as a bearer
              token (never logged). Unset: E(MASSED_COMPUTE_API_KEY).'
            - Never logged.
            - When not set, read from E(MASSED_COMPUTE_API_KEY).
            type: str
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://vm.massedcompute.com/api/v1
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          image_id:
            description:
            - Boot image id (C(GET /images) lists them as C(vm_image_id)); wins over C(image_name).
            - At least 1.
            type: int
          image_name:
            description: Boot image name, matched case-insensitively against C(vm_image_name) when C(image_id)
              is unset.
            type: str
            default: Ubuntu Server 22.04 w/ drivers
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          python_interpreter:
            description: 'The Python Ansible uses on the instance. Unset: Ansible''s interpreter discovery.'
            type: str
          regions:
            description: 'Regions to search, in order, when the request names none (the module''s C(regions)
              wins); V(any) lets Massed Compute pick. Unset: every region the GPU inventory lists with capacity.'
            type: list
            elements: str
          request_timeout_s:
            description:
            - Read timeout of every API request.
            - At least 0.
            type: float
            default: 60
          ssh_port:
            description:
            - The port sshd listens on (Massed Compute reports only an ip), for an image whose sshd listens
              elsewhere.
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: 'The login user of the image. Unset: the C(username) Massed Compute reports for the
              instance, lowercased (V(ubuntu) on its Ubuntu images); the task''s C(ssh_user) does not change
              it.'
            type: str
      nebius:
        description: 'The V(nebius) cloud: Nebius AI Cloud compute VMs, through its official Python SDK C(nebius)
          (gRPC; no REST API exists). The login user and the SSH key, and a boot script, go in as cloud-init
          user data; each VM gets its own security group.'
        type: dict
        suboptions:
          allowed_cidrs:
            description: 'Source ranges of the VM''s security group when the task names none (at most 8, Nebius''s
              limit per rule). Required one way or the other: V(0.0.0.0/0) is never assumed.'
            type: list
            elements: str
          api_endpoint:
            description: 'C(host:port) that every Nebius service is called at (a proxy or a test server).
              Unset: the SDK''s own resolution of Nebius''s public endpoints (C(*.api.nebius.cloud:443)).'
            type: str
          api_insecure:
            description: 'Plaintext gRPC (no TLS) to C(api_endpoint): only for a local test server.'
            type: bool
            default: false
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          credentials_file:
            description: A service-account credentials JSON file (C(nebius iam auth-public-key generate));
              the SDK exchanges it for IAM tokens.
            type: path
          disk_size_gib:
            description:
            - Boot disk size in GiB.
            - At least 1.
            type: int
            default: 200
          disk_type:
            description: Boot disk type.
            type: str
            choices:
            - NETWORK_SSD
            - NETWORK_HDD
            - NETWORK_SSD_NON_REPLICATED
            - NETWORK_SSD_IO_M3
            default: NETWORK_SSD
          iam_token:
            description:
            - 'An IAM access token (C(nebius iam get-access-token)), never logged. Unset: E(NEBIUS_IAM_TOKEN),
              as the SDK reads it. Exclusive with the service-account options.'
            - Never logged.
            - When not set, read from E(NEBIUS_IAM_TOKEN).
            type: str
          image_family:
            description: Public image family of the boot disk.
            type: str
            default: ubuntu22.04-cuda12
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          prices:
            description: Price offers with the billing calculator (C(nebius.billing.v1.CalculatorService));
              V(false) leaves offers unpriced.
            type: bool
            default: true
          project_id:
            description:
            - 'The project (C(project-...)) the VMs are made in; a Nebius project lives in one region (C(region)).
              Unset: E(NEBIUS_PROJECT_ID). Required for every API call.'
            - When not set, read from E(NEBIUS_PROJECT_ID).
            type: str
          python_interpreter:
            description: 'The Python Ansible uses on the instance. Unset: Ansible''s interpreter discovery.'
            type: str
          region:
            description: The region of C(project_id) (offers are in it; a request naming only other regions
              is refused, naming it).
            type: str
            default: eu-north1
          request_timeout_s:
            description:
            - Deadline of every API call.
            - At least 0.
            type: float
            default: 60
          service_account_id:
            description: Service account id, with C(service_account_public_key_id) and C(service_account_private_key_file).
            type: str
          service_account_private_key_file:
            description: Path of the PEM private key of the service account.
            type: path
          service_account_public_key_id:
            description: The id of the service account's public key.
            type: str
          ssh_port:
            description:
            - The port sshd listens on (opened in the security group); for images whose sshd listens elsewhere.
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: The login user cloud-init makes with the SSH key, when the task names none.
            type: str
            default: ubuntu
          subnet_id:
            description: 'The subnet of the VM''s network interface. Unset: the first subnet the project lists
              (its default network''s).'
            type: str
          tenant_id:
            description: 'The tenant (C(tenant-...)) of C(project_id), whose capacity advisor (C(nebius.capacity.v1.ResourceAdviceService))
              says which presets are out of stock. Unset: the project''s parent, read with C(nebius.iam.v2.ProjectService.Get).
              An advisor that cannot be consulted leaves every offer available, saying why in the offer''s
              detail.'
            type: str
      primeintellect:
        description: 'The V(primeintellect) cloud: Prime Intellect''s GPU marketplace, through its REST API
          v1. Offers come from many underlying providers; a pod is a container or a VM depending on the provider,
          so k3s is never installed there, and no boot script runs (Prime has no user data). The SSH user
          and port come from the pod''s connection string.'
        type: dict
        suboptions:
          api_key:
            description:
            - API key sent with every request (never logged).
            - Never logged.
            - When not set, read from E(PRIME_API_KEY).
            type: str
          api_url:
            description: Base URL of Prime Intellect's API, with or without its C(/api/v1) suffix (Prime's
              CLI takes either); point it at a proxy or a test server.
            type: str
            default: https://api.primeintellect.ai
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          disk_size_gb:
            description:
            - 'The pod''s disk in GB (C(diskSize)). Unset: the offer''s default.'
            - At least 1.
            type: int
          image:
            description: The pod's image, one of Prime's environment names; offers that do not list it are
              unavailable.
            type: str
            default: ubuntu_22_cuda_12
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          providers:
            description: 'Only offers of these underlying providers (e.g. V(runpod), V(hyperstack), V(primecompute)).
              Unset: every provider.'
            type: list
            elements: str
          regions:
            description: 'Data centers (an offer''s C(dataCenter), e.g. V(CANADA-1)), Prime''s region names
              (an offer''s C(region), e.g. V(united_states), V(canada)) or countries (e.g. V(US)) to search,
              when the request names none (the module''s C(regions) wins). Unset: every location.'
            type: list
            elements: str
          security:
            description: 'Only offers of this kind: V(secure_cloud) (data centers), V(community_cloud), or
              V(any) (both).'
            type: str
            choices:
            - any
            - secure_cloud
            - community_cloud
            default: any
          team_id:
            description: 'Create pods for this Prime team (C(team.teamId)). Unset: the key''s user.'
            type: str
      runpod:
        description: 'The V(runpod) cloud: RunPod GPU pods (containers, not VMs: no k3s, no boot script),
          through its REST API v2. The login is the pod''s sshd on its public IP and the port RunPod maps
          to 22/tcp; the controller''s key is registered with the account as C(gpuprov-<vm>-<fingerprint>)
          (removed at teardown) and also set in the pod''s C(PUBLIC_KEY) environment variable. Pod ports have
          no firewall: C(allowed_cidrs) cannot be enforced on RunPod.'
        type: dict
        suboptions:
          api_key:
            description:
            - API key sent with every request (never logged).
            - Never logged.
            - When not set, read from E(RUNPOD_API_KEY).
            type: str
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://api.runpod.io/v2
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          cloud_type:
            description: 'RunPod''s cloud tier: V(SECURE) (RunPod-operated data centers) or V(COMMUNITY) (community
              hosts, cheaper). Prices and stock are read for this tier.'
            type: str
            choices:
            - SECURE
            - COMMUNITY
            default: SECURE
          container_disk_gb:
            description:
            - 'Container disk in GB (ephemeral: wiped when the pod restarts).'
            - At least 1.
            type: int
            default: 50
          image:
            description: Container image of the pod. It must start sshd with the keys in C(PUBLIC_KEY), as
              RunPod's official images do.
            type: str
            default: runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404
          min_cuda_version:
            description: 'Lowest CUDA version the host must report, as V(major.minor) (for example V(12.4));
              unset: any. Applied to the catalog''s stock and to the pod.'
            type: str
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          regions:
            description: 'RunPod data center ids to search, in order (for example V(US-TX-3), V(EU-RO-1)),
              when the request names none (the module''s C(regions) wins). Unset: every data center the catalog
              lists for the GPU.'
            type: list
            elements: str
          volume_gb:
            description:
            - 'Size in GB of a persistent volume on the pod''s host, mounted at C(volume_path); unset: none.
              It is destroyed with the pod.'
            - At least 10.
            type: int
          volume_path:
            description: Mount path of the persistent volume.
            type: str
            default: /workspace
      verda:
        description: 'The V(verda) cloud: Verda (formerly DataCrunch), through its REST API v1 with OAuth2
          client credentials. Verda has no firewall API: an instance''s public address has every port open,
          so C(allowed_cidrs) cannot be enforced there (the k3s API is reached through an SSH tunnel).'
        type: dict
        suboptions:
          api_url:
            description: Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test
              server.
            type: str
            default: https://api.verda.com/v1
          boot_timeout_s:
            description:
            - Seconds an instance may take to be Running with an SSH endpoint (the cloud's boot timeout capability;
              the vm module's C(boot_timeout) overrides it).
            - At least 0.
            type: float
            default: 900
          client_id:
            description:
            - OAuth2 client id of a Verda API credential (never logged). Required, here or in E(VERDA_CLIENT_ID).
            - Never logged.
            - When not set, read from E(VERDA_CLIENT_ID).
            type: str
          client_secret:
            description:
            - OAuth2 client secret of that credential (never logged). Required, here or in E(VERDA_CLIENT_SECRET).
              The adapter trades it for an access token at C(<api_url>/oauth2/token) and fetches a new one
              when it expires or is refused.
            - Never logged.
            - When not set, read from E(VERDA_CLIENT_SECRET).
            type: str
          image:
            description: 'OS image type (or image id) of new instances. Unset: V(ubuntu-24.04-cuda-12.8-open-docker)
              where the instance type supports it, otherwise the first image the instance type lists as supported.'
            type: str
          os_volume_on_delete:
            description: 'What becomes of an instance''s OS volume when the collection deletes the instance
              (C(down), a failed offer, a sweep). V(delete_permanently): it is deleted with the instance,
              as the boot disk is on the other clouds, and nothing of the VM is left on the account. V(move_to_trash):
              Verda''s own default, the volume goes to the account''s trash, where Verda keeps it for 96 hours
              (it can be restored from there). A spot instance that Verda discontinues takes its OS volume
              with it either way.'
            type: str
            choices:
            - delete_permanently
            - move_to_trash
            default: delete_permanently
          os_volume_size_gb:
            description:
            - Size of the OS volume in GB.
            - At least 1.
            type: int
            default: 100
          poll_interval_s:
            description:
            - The longest wait in seconds between two observations of a booting or leaving instance (the cloud's
              rate-limit-safe interval). A boot is first observed after 1 s, then less often as it goes on,
              up to this.
            - At least 0.
            type: float
            default: 10
          regions:
            description: 'Location codes to search, in order (for example V(FIN-01), V(FIN-03), V(ICE-01)),
              when the request names none (the module''s C(regions) wins). Unset: every location the availability
              listing reports.'
            type: list
            elements: str
          ssh_port:
            description:
            - The SSH port of the instance, for an image whose sshd listens elsewhere than 22.
            - At least 1.
            type: int
            default: 22
          ssh_user:
            description: The image's login user that the registered SSH key authorises (Verda's images log
              in as V(root)); the adapter creates no user.
            type: str
            default: root
"""
