# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeconfig handling on the controller: turn the VM's ``k3s.yaml`` into a
kubeconfig named after the VM that points at the path the user will use, write it
0600, and optionally merge it into another kubeconfig (PyYAML, never a shell).

Every path written for a VM is recorded first in ``<state dir>/kubeconfigs.json``
(0600), so ``down`` removes the cluster-admin credentials wherever they were put."""

from __future__ import annotations

import contextlib
import copy
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import (
    PrivateFileError, locked, remove_private, write_private,
)

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
        raise KubeconfigError("k3s.yaml is not YAML: %s" % exc) from exc
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


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def load_file(path: str) -> Optional[Dict[str, Any]]:
    if not os.path.exists(path):
        return None
    text = _read(path)
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise KubeconfigError("%s is not YAML (%s); fix or move it, or leave the merge off" % (path, exc)) from exc
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


def remove_entries(config: Dict[str, Any], name: str) -> Dict[str, Any]:
    """``config`` without the cluster, user and context named ``name``; current-context is
    unset only when it was that context. Every other entry is kept as it is."""
    kept = copy.deepcopy(config)
    for section in ("clusters", "users", "contexts"):
        if isinstance(kept.get(section), list):
            kept[section] = [e for e in kept[section] if not (isinstance(e, dict) and e.get("name") == name)]
    if kept.get("current-context") == name:
        del kept["current-context"]
    return kept


# -- where a VM's kubeconfigs went ---------------------------------------------------
RECORD_FILE = "kubeconfigs.json"


def record_path(state_dir: str) -> str:
    return os.path.join(state_dir, RECORD_FILE)


def _read_record(path: str) -> Dict[str, Dict[str, List[str]]]:
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        try:
            data = json.load(handle)
        except ValueError as exc:
            raise KubeconfigError("%s is not JSON (%s); move it away (it lists the kubeconfigs gpuprov wrote)"
                                  % (path, exc)) from exc
    return data if isinstance(data, dict) else {}


def _write_record(path: str, record: Dict[str, Dict[str, List[str]]]) -> None:
    write_private(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def _remember(record: Dict[str, Dict[str, List[str]]], name: str, field: str, path: str) -> None:
    entry = record.setdefault(name, {})
    entry[field] = sorted(set(entry.get(field) or []) | {path})


def write_for_vm(state_dir: str, config: Dict[str, Any], path: str, merge_path: Optional[str] = None,
                 set_current: bool = False, check_mode: bool = False) -> Tuple[bool, bool]:
    """Write ``config`` (from for_vm) to ``path`` and, with ``merge_path``, merge it there.

    The paths are recorded before anything is written, so a crash in between leaves
    nothing that down would not find. gpuprov's writers of any kubeconfig are serialised
    by the record's lock (never ``<kubeconfig>.lock``: kubectl takes that one itself).
    Returns (changed, merged)."""
    name = config["current-context"]
    text = dump(config)
    record_file = record_path(state_dir)
    with contextlib.nullcontext() if check_mode else locked(record_file):
        if check_mode:
            changed = not os.path.exists(path) or _read(path) != text
        else:
            record = _read_record(record_file)
            _remember(record, name, "files", path)
            if merge_path:
                _remember(record, name, "merged_into", merge_path)
            _write_record(record_file, record)
            changed = write_private(path, text)
        merged = False
        if merge_path:
            existing = load_file(merge_path)
            new = dump(merge(existing, config, set_current))
            if existing is None or dump(existing) != new:
                if not check_mode:
                    write_private(merge_path, new)
                merged = changed = True
    return changed, merged


def _legacy_paths(name: str) -> Tuple[str, str]:
    """Where a kubeconfig written before the record existed would be: the role's defaults."""
    kube = os.path.expanduser("~/.kube")
    return os.path.join(kube, "gpuprov-%s.yaml" % name), os.path.join(kube, "config")


def _same_entries(a: Dict[str, Any], b: Dict[str, Any], name: str) -> bool:
    for section in ("clusters", "users", "contexts"):
        mine = [e for e in (a.get(section) or []) if isinstance(e, dict) and e.get("name") == name]
        theirs = [e for e in (b.get(section) or []) if isinstance(e, dict) and e.get("name") == name]
        if mine != theirs:
            return False
    return True


def remove_for_vm(name: str, state_dir: str) -> List[str]:
    """Remove what was written for VM ``name``: its kubeconfig files, and its cluster, user
    and context from every kubeconfig it was merged into. Returns the paths changed.

    Paths come from the record. Without a record entry (a kubeconfig written before it
    existed), the role's default places are cleaned, and only of entries identical to the
    VM's own kubeconfig there, so nothing of the user's is taken. What cannot be read,
    written or removed stays in the record for the next down, and is reported as one
    KubeconfigError once everything else is done."""
    name = str(name)
    record_file = record_path(state_dir)
    changed: List[str] = []
    problems: List[str] = []
    with locked(record_file):
        record = _read_record(record_file)
        entry = record.get(name)
        if entry is not None:
            merges = [(target, None) for target in entry.get("merged_into") or []]
            files = list(entry.get("files") or [])
        else:
            own, default_merge = _legacy_paths(name)
            own_config = None
            try:
                own_config = load_file(own)
            except KubeconfigError:
                pass
            ours = own_config is not None and [c.get("name") for c in own_config.get("contexts") or []
                                               if isinstance(c, dict)] == [name]
            merges = [(default_merge, own_config)] if ours else []
            files = [own] if ours else []
        left: Dict[str, List[str]] = {"files": [], "merged_into": []}
        for target, must_match in merges:
            try:
                existing = load_file(target)
                if existing is None or (must_match is not None and not _same_entries(existing, must_match, name)):
                    continue
                kept = remove_entries(existing, name)
                if kept != existing:
                    write_private(target, dump(kept))
                    changed.append(target)
            except (KubeconfigError, PrivateFileError, OSError) as exc:
                problems.append("%s (%s: remove its context, cluster and user %s, e.g. kubectl config "
                                "delete-context/delete-cluster/delete-user)" % (exc, target, name))
                left["merged_into"].append(target)
        for path in files:
            try:
                if remove_private(path):
                    changed.append(path)
            except PrivateFileError as exc:
                problems.append(str(exc))
                left["files"].append(path)
        if entry is not None:
            if problems:
                record[name] = left      # what is still there, for the next down
            else:
                del record[name]
            _write_record(record_file, record)
    if problems:
        raise KubeconfigError("the cluster credentials of %s were not all removed: %s" % (name, "; ".join(problems)))
    return changed
