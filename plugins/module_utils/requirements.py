# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one message for a Python package gpuprov.cloud needs and cannot import.

The collection ships its requirements as pip files: ``requirements/<cloud>.txt`` for each cloud (each
includes ``requirements/base.txt``, what every cloud needs), ``requirements/postgresql.txt`` for a
PostgreSQL journal, and ``requirements.txt`` with all of them. ``missing_package`` names the package, the
Python that lacks it and the exact command that installs it: ``<that python> -m pip install -r <file>``,
the file's path being this installed collection's, found from this file's own location at run time.
Where the collection's files are not on disk (a module shipped to another host inside its zip), the
command installs the package's requirement itself."""

from __future__ import annotations

import os
import shlex
import sys
from typing import Optional

# pip name -> (its requirement, as the requirements files pin it; the file that installs it, by its stem)
PACKAGES = {
    "paramiko": ("paramiko>=3.4", "base"),
    "cryptography": ("cryptography>=41", "base"),
    "docker": ("docker>=7.0", "docker"),
    "boto3": ("boto3>=1.34", "aws"),
    "google-cloud-compute": ("google-cloud-compute>=1.18", "gcp"),
    # the REST clouds' one package: in each of their files (the cloud's file is named when it is known)
    "requests": ("requests>=2.31", None),
    "nebius": ("nebius>=0.6.29,<1", "nebius"),
    "psycopg": ("psycopg[binary]>=3.1", "postgresql"),
}
# What an ImportError names (its top-level module) -> the pip name that provides it.
IMPORT_NAMES = {"botocore": "boto3", "google": "google-cloud-compute", "psycopg_binary": "psycopg"}
# The collection's root: this file is <root>/plugins/module_utils/requirements.py.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What requirements.txt installs: everything.
ALL = "requirements.txt"
# The clouds with a file of their own, requirements/<cloud>.txt.
CLOUD_FILES = ("local", "docker", "aws", "gcp", "lambda", "runpod", "primeintellect", "verda", "massedcompute",
               "hyperstack", "digitalocean", "nebius")
# The files that are not a cloud's, as the message names what they install.
OTHER_FILES = {"requirements/base.txt": "what every cloud needs",
               "requirements/postgresql.txt": "what a PostgreSQL journal needs",
               ALL: "the collection's requirements"}


def requirements_file(package: str, cloud: Optional[str] = None) -> str:
    """The file, relative to the collection root, that installs ``package``: ``cloud``'s own file when
    it has one (each cloud's file includes the base), else the package's, else requirements.txt
    (everything). ``cloud`` may be a cloud's client name ("verda token")."""
    stem = str(cloud or "").split(" ", maxsplit=1)[0]
    if stem in CLOUD_FILES:
        return "requirements/%s.txt" % stem
    stem = PACKAGES.get(pip_name(package), (None, None))[1]
    return "requirements/%s.txt" % stem if stem else ALL


def install_command(package: str, cloud: Optional[str] = None) -> str:
    """The exact command that installs ``package`` for this Python (see the module docstring)."""
    python = shlex.quote(sys.executable or "python3")
    path = os.path.join(COLLECTION_ROOT, requirements_file(package, cloud))
    if os.path.isfile(path):
        return "%s -m pip install -r %s" % (python, shlex.quote(path))
    name = pip_name(package)
    return "%s -m pip install %s" % (python, shlex.quote(PACKAGES.get(name, (name, None))[0]))


def missing_package(package: str, cloud: Optional[str] = None) -> str:
    """``package`` (a pip or an import name) is not installed: the sentence that says so and how to
    install it, with ``cloud``'s requirements file where the cloud is known."""
    name = pip_name(package)
    relative = requirements_file(name, cloud)
    what = OTHER_FILES.get(relative) or "the %s cloud's requirements" % relative[len("requirements/"):-len(".txt")]
    return "%s is not installed for the Python that runs gpuprov.cloud (%s); install %s: %s" % (
        name, sys.executable or "python3", what, install_command(name, cloud))


def missing_import(error: ImportError, cloud: Optional[str] = None) -> str:
    """``missing_package`` for the package an ImportError names; a module of this collection that cannot
    be imported is a broken install, not a requirement."""
    name = getattr(error, "name", None) or ""
    if name.startswith("ansible_collections."):
        return ("%s cannot be imported (%s): the installed collection is incomplete; reinstall it "
                "(ansible-galaxy collection install --force gpuprov.cloud, or its tarball)" % (name, error))
    return missing_package(name or str(error), cloud)


def pip_name(package: str) -> str:
    """The pip name of ``package``, given as a pip or an import name (``botocore``, ``google.cloud``)."""
    top = str(package or "").strip().split(".", maxsplit=1)[0]
    return IMPORT_NAMES.get(top, top)
