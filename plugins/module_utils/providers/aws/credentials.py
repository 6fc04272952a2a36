# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether boto3 would find AWS credentials on this controller, told without a call
(the adapter's ``check_credentials``).

botocore's own credential chain is resolved, minus the three providers that would call
out or run something to answer: the container and instance-metadata roles (an HTTP call)
and ``credential_process`` (a program). Each of them counts as found when it is set up
here: the container variables are set, this machine is an EC2 instance whose metadata
service is not disabled, the profile names a ``credential_process``. Everything else
(the environment, the shared files, SSO and ``aws login`` caches, assume-role and web
identity profiles) is read from local files and variables only; its credentials are never
fetched or refreshed here.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.aws import CREDENTIALS

# Providers of botocore's chain that call out (or run a program) to answer, and what tells
# that they are set up here.
_CALLING = ("container-role", "iam-role", "custom-process")
_CONTAINER_VARIABLES = ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")
# What an EC2 instance's DMI (Nitro) or Xen hypervisor says of it.
_EC2_MARKERS = (
    ("/sys/devices/virtual/dmi/id/board_asset_tag", lambda text: text.startswith("i-")),
    ("/sys/devices/virtual/dmi/id/sys_vendor", lambda text: text.startswith("Amazon EC2")),
    ("/sys/hypervisor/uuid", lambda text: text.lower().startswith("ec2")),
)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(64).strip()
    except OSError:
        return ""


def on_ec2(read: Callable[[str], str] = _read) -> bool:
    """This machine says it is an EC2 instance (local files only)."""
    return any(test(read(path)) for path, test in _EC2_MARKERS)


def missing(options: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None,
            ec2: Optional[Callable[[], bool]] = None) -> Optional[str]:
    """Why boto3 would find no credentials here (the message naming the options and variables
    that provide them), or None when it would find some or only a call could tell."""
    environ = os.environ if environ is None else environ
    if options.get("aws_access_key_id") or options.get("aws_secret_access_key"):
        if not options.get("profile"):
            return CREDENTIALS.missing(options, environ={})  # both keys, or which one is missing
    if any(environ.get(name) for name in _CONTAINER_VARIABLES):
        return None
    if str(environ.get("AWS_EC2_METADATA_DISABLED", "")).lower() != "true" and (ec2 or on_ec2)():
        return None
    try:
        import botocore.session  # pylint: disable=import-outside-toplevel
        from botocore import exceptions  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None   # building the adapter says what to install
    session = botocore.session.Session(profile=options.get("profile") or None)
    try:
        if session.get_scoped_config().get("credential_process"):
            return None
        resolver = session.get_component("credential_provider")
        for name in _CALLING:
            resolver.remove(name)
        found = resolver.load_credentials()
    except exceptions.ProfileNotFound:
        return ("aws: profile %r not found in ~/.aws/config or ~/.aws/credentials (cloud_options.aws.profile or "
                "AWS_PROFILE names it)" % session.profile)
    except exceptions.PartialCredentialsError as exc:
        return "aws: incomplete credentials: %s; %s" % (exc, CREDENTIALS.message().split(": ", 2)[-1])
    except Exception:  # noqa: BLE001 - a provider the SDK itself may yet make work (an SSO cache, aws login)
        return None
    return None if found is not None else CREDENTIALS.message()
