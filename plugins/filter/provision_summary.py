# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provision playbook's closing lines for one VM. The documentation is in provision_summary.yml.

A filter, not a Jinja expression in the playbook: the expression read the registered result some twenty
times a VM, and each read templates the whole result again (half a second for a fleet of 32)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.cloud.plugins.module_utils import money


def _get(mapping, *keys):
    """``mapping[k1][k2]...``, None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def _search_line(search):
    if not search:
        return "reused: no search"
    skipped = search.get("skipped") or []
    before = "; skipped before it: " + "; ".join(skipped) if skipped else ""
    return "offer %s of %s: %s%s" % (search.get("offer"), search.get("of"), search.get("offer_id"), before)


def _limits_line(limits, name):
    """What the VM's limits (the vm task's ``limits``) do to it, or None where it has none."""
    if not isinstance(limits, dict):
        return None
    parts = []
    if limits.get("deadline"):
        why = "its max_spend" if limits.get("deadline_cause") == "max_spend" else "its expiry"
        parts.append("removed after %s (%s; ansible-playbook gpuprov.cloud.reap -e delete=true)" % (limits["deadline"], why))
    if limits.get("idle_stop"):
        parts.append("powered off after %s idle" % limits["idle_stop"])
    if not parts:
        return None
    return "limits: %s %s; status shows the time left" % (name, ", ".join(parts))


def provision_summary(result, name, check_mode=False, smoke=None, kubeconfig=None, validation=None):
    """The lines that say how to reach VM ``name`` from its gpuprov.cloud.vm ``result``."""
    if not isinstance(result, dict):
        raise AnsibleFilterError("provision_summary: expected the registered result of gpuprov.cloud.vm, got %s"
                                 % type(result).__name__)
    lines = [result.get("msg")] if check_mode else []
    if result.get("connection") is None:
        return lines
    vm = result.get("vm") or {}
    price = vm.get("price_per_hour")
    cost = "" if price is None else ", %s" % money.per_hour(price)
    lines.append("%s is up on %s/%s (%s)%s" % (name, vm.get("cloud"), vm.get("region"), vm.get("instance_id"), cost))
    lines.append(_search_line(result.get("search")))
    # The vm task's own login ran the smoke command; a VM it did not run it on ran it through Ansible.
    ran = _get(result, "smoke", "stdout")
    lines.append("smoke command: %s" % (ran if ran is not None else _get(smoke, "stdout")))
    lines.append("ssh: add 'Include %s' to ~/.ssh/config once, then: ssh %s" % (result.get("ssh_config"), name))
    lines.append("tear down: ansible-playbook gpuprov.cloud.down -e vm=%s" % name)
    limits = _limits_line(result.get("limits"), name)
    if limits:
        lines.append(limits)
    k8s = result.get("k8s") or {}
    if not k8s.get("enabled"):
        lines.append(k8s.get("note") or "k3s: off (k8s=false)")
        return lines
    lines.append("k3s: KUBECONFIG=%s kubectl get nodes" % (_get(kubeconfig, "path") or "?"))
    if k8s.get("access") == "SshTunnel":
        lines.append("k3s API through SSH: ansible-playbook gpuprov.cloud.tunnel -e vm=%s (keep it running)" % name)
    else:
        lines.append("k3s API: %s" % (_get(validation, "path") or "direct"))
    return lines


class FilterModule:

    def filters(self):
        return {"provision_summary": provision_summary}
