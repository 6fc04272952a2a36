# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker test cloud's image recipe: the Dockerfile of its sshd image and the entrypoint
that makes a container behave like a freshly booted VM. Both are %-templates of ``base``
(the base image) and ``files`` (where create() copies the VM's files in)."""

DOCKERFILE = """\
# gpuprov docker test cloud: a container that behaves like a freshly booted VM.
ARG BASE=%(base)s
FROM ${BASE}
COPY entrypoint.sh /usr/local/sbin/gpuprov-entrypoint
# Host keys are generated per container by the entrypoint, never shared by the image.
RUN { test -x /usr/sbin/sshd && command -v ssh-keygen >/dev/null \\
      || { echo "gpuprov: the base image has no OpenSSH server (install openssh-server)" >&2; exit 1; }; } \\
 && chmod 0755 /usr/local/sbin/gpuprov-entrypoint \\
 && rm -f /etc/ssh/ssh_host_* \\
 && mkdir -p /run/sshd /root/.ssh %(files)s /etc/ssh/sshd_config.d \\
 && chmod 700 /root/.ssh \\
 && printf '%%s\\n' \\
      'PermitRootLogin prohibit-password' \\
      'PubkeyAuthentication yes' \\
      'PasswordAuthentication no' \\
      'KbdInteractiveAuthentication no' \\
      'UsePAM no' \\
      'PrintMotd no' \\
      'AuthorizedKeysFile .ssh/authorized_keys' \\
      > /etc/ssh/sshd_config.d/00-gpuprov.conf \\
 && if ! grep -q '^Include /etc/ssh/sshd_config.d/' /etc/ssh/sshd_config; then \\
      { echo 'Include /etc/ssh/sshd_config.d/*.conf'; cat /etc/ssh/sshd_config; } > /etc/ssh/sshd_config.new \\
      && mv /etc/ssh/sshd_config.new /etc/ssh/sshd_config; fi
EXPOSE 22
LABEL gpuprov-image=sshd
ENTRYPOINT ["/usr/local/sbin/gpuprov-entrypoint"]
"""

# Runs as PID 1 and ends by exec-ing sshd, so the container lives as long as sshd.
# Inputs are files copied in by create() before the container starts:
#   authorized_keys, ssh_user (optional), boot.sh (optional)
ENTRYPOINT = """\
#!/bin/sh
# gpuprov docker test cloud entrypoint: keys, host keys, boot script, sshd.
set -eu
files=%(files)s
user=root
if [ -s "$files/ssh_user" ]; then user=$(cat "$files/ssh_user"); fi
if [ "$user" != root ] && ! id "$user" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$user"
    usermod -p '*' "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)
mkdir -p /run/sshd "$home/.ssh"
if [ -f "$files/authorized_keys" ]; then
    cp "$files/authorized_keys" "$home/.ssh/authorized_keys"
fi
chmod 700 "$home/.ssh"
touch "$home/.ssh/authorized_keys"
chmod 600 "$home/.ssh/authorized_keys"
chown -R "$user" "$home/.ssh"
# This container's own host keys (the image carries none).
ssh-keygen -A >/dev/null
# The boot script runs once per container, in the background like cloud-init,
# while sshd comes up. Double fork: it is re-parented to the init process
# (docker run --init), which reaps it and whatever it leaves behind.
if [ -f "$files/boot.sh" ] && [ ! -e "$files/boot.started" ]; then
    : > "$files/boot.started"
    chmod 0700 "$files/boot.sh"
    ( ( rc=0; "$files/boot.sh" >/var/log/gpuprov-boot.log 2>&1 </dev/null || rc=$?
        echo "$rc" > "$files/boot.status" ) & )
fi
exec /usr/sbin/sshd -D -e
"""
