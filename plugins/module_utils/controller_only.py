# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``main`` of a module whose work its action plugin does on the controller.

Such a module file carries the documentation and the argument spec (ansible-doc and
ansible-test read them there). Run as a plain module (an action plugin missing or
bypassed), it validates its arguments like any module and then fails, saying why,
instead of doing nothing. Its arguments' secrets stay hidden there too (journal_module.JournalModule)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.journal_module import JournalModule


def refuse_outside_controller(name, argument_spec):
    """Validate the arguments, then fail: ``name`` only runs through its action plugin."""
    module = JournalModule(argument_spec=argument_spec, supports_check_mode=True)
    module.fail_json(msg="gpuprov.cloud.%s runs on the controller through its action plugin; call it as a task "
                         "(it was executed as a plain module instead)" % name)
