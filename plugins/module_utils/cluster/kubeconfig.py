# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeconfig handling on the controller: turn the VM's ``k3s.yaml`` into a
kubeconfig named after the VM that points at the path the user will use, write it
0600, and optionally merge it into another kubeconfig (PyYAML, never a shell)."""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Optional

try:
    import yaml
    HAS_YAML = True
except ImportError:  # PyYAML ships with ansible-core; sanity imports without it
    yaml = None
    HAS_YAML = False


class KubeconfigError(Exception):
    """The VM's k3s.yaml or an existing kubeconfig cannot be used; the message says why."""


def _one(items: List[Dict[str, Any]], what: str) -> Dict[str, Any]:
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        raise KubeconfigError("k3s.yaml has no %s entry" % what)
    return items[0]


def for_vm(k3s_yaml: str, name: str, server: str) -> Dict[str, Any]:
    """A kubeconfig with one cluster, user and context, all named ``name``, whose server
    is ``server``; credentials and CA come from the VM's ``k3s.yaml``."""
    # Plain str: Ansible hands in str subclasses that PyYAML's safe dumper refuses.
    name, server, k3s_yaml = str(name), str(server), str(k3s_yaml)
    try:
        source = yaml.safe_load(k3s_yaml)
    except yaml.YAMLError as exc:
        raise KubeconfigError("k3s.yaml is not YAML: %s" % exc)
    if not isinstance(source, dict):
        raise KubeconfigError("k3s.yaml is not a kubeconfig (no mapping at the top)")
    cluster = copy.deepcopy(_one(source.get("clusters"), "cluster").get("cluster") or {})
    user = copy.deepcopy(_one(source.get("users"), "user").get("user") or {})
    if not cluster.get("certificate-authority-data"):
        raise KubeconfigError("k3s.yaml has no certificate-authority-data")
    cluster["server"] = server
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "preferences": {},
    }


def dump(config: Dict[str, Any]) -> str:
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=True)


def load_file(path: str) -> Optional[Dict[str, Any]]:
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        text = handle.read()
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise KubeconfigError("%s is not YAML (%s); fix or move it, or leave the merge off" % (path, exc))
    if not isinstance(data, dict):
        raise KubeconfigError("%s is not a kubeconfig (no mapping at the top)" % path)
    return data


def merge(existing: Optional[Dict[str, Any]], new: Dict[str, Any], set_current: bool = False) -> Dict[str, Any]:
    """``existing`` with every cluster, user and context of ``new`` added or replaced by name."""
    merged = copy.deepcopy(existing) if existing else {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    for section in ("clusters", "users", "contexts"):
        entries = [e for e in (merged.get(section) or []) if isinstance(e, dict)]
        for entry in new.get(section) or []:
            entries = [e for e in entries if e.get("name") != entry["name"]] + [copy.deepcopy(entry)]
        merged[section] = entries
    if set_current or not merged.get("current-context"):
        merged["current-context"] = new.get("current-context")
    return merged
