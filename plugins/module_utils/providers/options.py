# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adapter options, declared once per cloud and typed by Ansible's own validator.

Each cloud declares its options in ``providers/cloud_options/<cloud>.py`` as an Ansible
argument spec whose entries also carry a ``description`` (and, for numbers, a
``minimum`` and a ``maximum``). That one declaration is:

* the check of ``cloud_options.<cloud>`` whenever an adapter is built
  (:class:`TypedOptionsProvider`, :func:`typed_options`): unknown keys, types
  (``privileged: "false"`` is false), choices, defaults and environment fallbacks,
  by ``ArgumentSpecValidator``;
* which options are credentials: those marked ``no_log`` (:func:`secret_option_names`),
  never journalled and hidden by Ansible wherever they would show;
* the ``cloud_options`` suboptions of the modules' argument spec (:func:`argument_spec`);
* the modules' documentation (``scripts/gen-cloud-options-doc.py`` writes
  ``doc_fragments/cloud_options.py`` from it).

Beside its options, each cloud declares where its adapter finds credentials
(:class:`Credentials`, ``CREDENTIALS`` in the same file): the one place that knows which
options and environment variables carry them, so that a missing credential's message
names them, the adapters' local check (``Provider.check_credentials``) and the orphan
sweep's choice of clouds derive from it.

The declarations live outside the adapter packages so that building an argument spec
never imports a cloud SDK. Options several clouds share are declared here once.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import env_fallback

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Provider, ProviderError,
)


# Option names that read as credentials: a second guard, beside each adapter's declared
# ``no_log`` options (Provider.secret_options), for adapters that declare none.
SECRET_OPTION = re.compile(r"secret|passw|token|access_key|api_?key|private|credential", re.IGNORECASE)

# Keys of a declaration that document or bound an option; Ansible's argument spec has no such keys.
DOC_KEYS = ("description", "minimum", "maximum")
_MASK = "********"

OptionSpec = Dict[str, Dict[str, Any]]


def from_environment(*names: str) -> Tuple[Any, list]:
    """The ``fallback`` of an option read from the first of these environment variables that is set."""
    return (env_fallback, list(names))


def environment_names(declared: Mapping[str, Any]) -> Tuple[str, ...]:
    """The environment variables an option falls back to (for the documentation)."""
    fallback = declared.get("fallback")
    if fallback and fallback[0] is env_fallback:
        return tuple(fallback[1])
    return ()


def argument_spec(spec: OptionSpec) -> OptionSpec:
    """The Ansible argument spec of a declaration (a copy without the documentation keys)."""
    return {name: {k: copy.deepcopy(v) for k, v in declared.items() if k not in DOC_KEYS}
            for name, declared in spec.items()}


def secret_option_names(spec: OptionSpec) -> Tuple[str, ...]:
    """The credential options of a declaration: those marked ``no_log``."""
    return tuple(sorted(name for name, declared in spec.items() if declared.get("no_log")))


def _invalid(msg: str) -> ProviderError:
    return ProviderError(ErrorKind.INVALID_REQUEST, msg)


def _valid_names(spec: OptionSpec) -> str:
    return ", ".join("%s (alias %s)" % (name, ", ".join(spec[name]["aliases"])) if spec[name].get("aliases")
                     else name for name in sorted(spec))


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return text


def _secret_values(spec: OptionSpec, values: Mapping[str, Any]) -> Tuple[str, ...]:
    found = []
    for name, declared in spec.items():
        if not declared.get("no_log"):
            continue
        for key in (name,) + tuple(declared.get("aliases") or ()):
            if values.get(key) not in (None, ""):
                found.append(str(values[key]))
    return tuple(found)


def _field_errors(prefix: str, spec: OptionSpec, given: Mapping[str, Any]) -> str:
    """Each failing option's own error, named by its path (one validation per option)."""
    messages = []
    for name in sorted(spec):
        names = (name,) + tuple(spec[name].get("aliases") or ())
        one = ArgumentSpecValidator(argument_spec({name: spec[name]})).validate(
            {k: v for k, v in given.items() if k in names})
        messages.extend("%s.%s: %s" % (prefix, name, error) for error in one.error_messages)
    return "; ".join(messages)


def typed_options(cloud: str, spec: OptionSpec, options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``options`` checked and typed against ``spec``: every declared option present (its
    default, its environment fallback, or None), nothing else.

    Raises InvalidRequest naming ``cloud_options.<cloud>`` and the field: an unknown key
    (with the valid ones), a value of the wrong type or outside the choices, a number below
    its minimum or above its maximum. Credentials never appear in a message."""
    prefix = "cloud_options.%s" % cloud
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise _invalid("%s: expected a dict of adapter options, got %s" % (prefix, type(options).__name__))
    given = dict(options)
    result = ArgumentSpecValidator(argument_spec(spec)).validate(given)
    secrets = _secret_values(spec, given) + _secret_values(spec, result.validated_parameters)
    if result.unsupported_parameters:
        unknown = sorted(str(key) for key in result.unsupported_parameters)
        raise _invalid("%s: unknown option%s %s; valid options: %s" % (
            prefix, "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown), _valid_names(spec)))
    if result.error_messages:
        raise _invalid(_scrub(_field_errors(prefix, spec, given) or "%s: %s" % (
            prefix, "; ".join(result.error_messages)), secrets))
    typed = {name: result.validated_parameters.get(name) for name in spec}
    for name, declared in spec.items():
        minimum, maximum = declared.get("minimum"), declared.get("maximum")
        value = typed[name]
        if minimum is not None and value is not None and value < minimum:
            raise _invalid("%s.%s: expected a number >= %s, got %r" % (prefix, name, minimum, value))
        if maximum is not None and value is not None and value > maximum:
            raise _invalid("%s.%s: expected a number <= %s, got %r" % (prefix, name, maximum, value))
    return typed


# -- credentials ----------------------------------------------------------------------------

_DECLARED: Dict[str, "Credentials"] = {}


def _given(value: Any) -> bool:
    return value not in (None, "") and not (isinstance(value, str) and not value.strip())


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


class Credentials:
    """Where a cloud's adapter finds its credentials, declared once beside its options
    (``CREDENTIALS`` in ``providers/cloud_options/<cloud>.py``); the environment variables
    are the options' own fallbacks.

    ``sets``: the alternatives, each the options that together are one credential (an API
    key; an access key id with its secret; a profile). ``required``: options every call
    needs besides (a project id). ``environment``: variables the SDK reads itself;
    ``files``: files it reads (``~`` expanded); ``also``: other ways, in words, for the
    message. ``checked``: whether :meth:`missing` may refuse the cloud (False where the
    sources cannot be told locally: the sweep's guess only)."""

    def __init__(self, cloud: str, spec: OptionSpec, sets: Sequence[Sequence[str]] = (),
                 required: Sequence[str] = (), environment: Sequence[str] = (), files: Sequence[str] = (),
                 also: Sequence[str] = (), checked: bool = True):
        for name in [n for group in sets for n in group] + list(required):
            if name not in spec:
                raise ValueError("%s: credential option %r is not declared" % (cloud, name))
        self.cloud, self.spec = cloud, spec
        self.sets = tuple(tuple(group) for group in sets)
        self.required, self.environment = tuple(required), tuple(environment)
        self.files, self.also, self.checked = tuple(files), tuple(also), checked
        _DECLARED[cloud] = self

    def _option(self, name: str, bare: bool = False) -> str:
        return name if bare else "cloud_options.%s.%s" % (self.cloud, name)

    def _set_text(self, group: Sequence[str]) -> str:
        """``cloud_options.aws.a and b (or A and B)``: the options of one set, then their variables."""
        text = self._option(group[0]) + "".join(
            (" and " if i == len(group) - 1 else ", ") + name for i, name in enumerate(group[1:], 1))
        envs = [environment_names(self.spec[name]) for name in group]
        if all(envs):
            text += " (or %s)" % (_either(envs[0]) if len(group) == 1 else " and ".join(e[0] for e in envs))
        return text

    def message(self) -> str:
        """How to give this cloud credentials: ``<cloud>: no credentials: set ...``."""
        ways = [self._set_text(group) for group in self.sets]
        ways += list(self.environment) + list(self.also)
        return "%s: no credentials: set %s" % (self.cloud, "; or ".join(ways) or "its credentials")

    def _value(self, name: str, options: Mapping[str, Any], environ: Optional[Mapping[str, str]]) -> bool:
        names = (name,) + tuple(self.spec[name].get("aliases") or ())
        if any(_given(options.get(key)) for key in names):
            return True
        return environ is not None and any(_given(environ.get(var)) for var in environment_names(self.spec[name]))

    def missing(self, options: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None,
                exists: Callable[[str], bool] = os.path.exists, elsewhere: bool = False) -> Optional[str]:
        """What is missing, as the message that says how to set it; None when nothing is.

        ``options`` typed (their environment fallbacks applied: ``environ`` None) or as the task
        gave them (``environ``: where their variables are read). ``elsewhere``: the adapter found
        credentials by a way of its own (only the required options are checked). Local only:
        never a call."""
        for name in self.required:
            if not self._value(name, options, environ):
                return "%s: no %s: set %s" % (self.cloud, name, self._set_text((name,)))
        if elsewhere or self.found(options, environ, exists):
            return None
        for group in self.sets:
            given = [name for name in group if self._value(name, options, environ)]
            if given and len(group) > 1:
                unset = [name for name in group if name not in given]
                return "%s: incomplete credentials: %s set without %s; set %s" % (
                    self.cloud, ", ".join(given), ", ".join(unset),
                    "; ".join(self._set_text((name,)) for name in unset))
        return self.message()

    def found(self, options: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None,
              exists: Callable[[str], bool] = os.path.exists) -> bool:
        """Whether any source of credentials is set here: a whole set of options (given, or in their
        variables when ``environ`` is given), a variable the SDK reads, or one of its files."""
        env = os.environ if environ is None else environ
        if any(all(self._value(name, options, environ) for name in group) for group in self.sets):
            return True
        if any(_given(env.get(var)) for var in self.environment):
            return True
        return any(exists(os.path.expanduser(path)) for path in self.files)


def declared_credentials(cloud: str) -> Optional[Credentials]:
    """The credentials ``cloud`` declares (None: it needs none, as the local cloud)."""
    # The declarations are made as providers/cloud_options/* are imported; the registry imports every one
    # (it imports this module first: hence here, not at the top).
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry  # noqa: F401
    return _DECLARED.get(cloud)


def missing_credentials(cloud: str, options: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None,
                        exists: Callable[[str], bool] = os.path.exists) -> Optional[ProviderError]:
    """A Credentials error (blocking the whole cloud) naming what ``cloud`` lacks here, or None."""
    declared = declared_credentials(cloud)
    problem = declared.missing(options, environ, exists) if declared is not None and declared.checked else None
    return ProviderError(ErrorKind.CREDENTIALS, problem, BlockScope.CLOUD) if problem else None


class TypedOptionsProvider(Provider):
    """A Provider whose options are declared (``option_spec``) and typed when it is built:
    ``self.options`` holds every declared option, typed, and nothing else; its ``no_log``
    options are its ``secret_options``. Its ``check_credentials`` reads the cloud's
    declared :class:`Credentials` against those options."""

    option_spec: OptionSpec = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.secret_options = secret_option_names(cls.option_spec)

    def __init__(self, options: Optional[Mapping[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(typed_options(self.name, self.option_spec, options), journal_id=journal_id)

    def check_credentials(self) -> None:
        """The declared credential options set (their variables are already applied), else Credentials
        naming them and their environment variables. Local only."""
        problem = missing_credentials(self.name, self.options)
        if problem is not None:
            raise problem


# -- options several clouds share -----------------------------------------------------------

def seconds(default: Optional[float], description: str, maximum: Optional[float] = None) -> Dict[str, Any]:
    """A duration option in seconds (a number >= 0, and <= ``maximum`` when given)."""
    declared = dict(type="float", default=default, minimum=0, description=description)
    if maximum is not None:
        declared["maximum"] = maximum
    return declared


BOOT_TIMEOUT_S = seconds(900, "Seconds an instance may take to be Running with an SSH endpoint (the cloud's "
                              "boot timeout capability; the vm module's C(boot_timeout) overrides it).")
POLL_INTERVAL_S = seconds(10, "The longest wait in seconds between two observations of a booting or leaving "
                              "instance (the cloud's rate-limit-safe interval). A boot is first observed after "
                              "1 s, then less often as it goes on, up to this.")

REGIONS = dict(type="list", elements="str", description=(
    "Regions to search, in order, when the request names none (the module's C(regions) wins)."))

ALLOWED_CIDRS = dict(type="list", elements="str", description=(
    "Source addresses (CIDRs) allowed to reach the instance, when the task names none. "
    "V(0.0.0.0/0) is used only when given explicitly."))


def ssh_user(unset: str) -> Dict[str, Any]:
    """The login user option; ``unset`` says what an unset one means on this cloud."""
    return dict(type="str", description="The login user made or used on the instance, when the task names none. "
                                        "Unset: %s." % unset)


def k3s_direct(default: bool) -> Dict[str, Any]:
    return dict(type="bool", default=default, description=(
        "Also open the k3s ports (6443, 80, 443) to the allowed addresses and report k3s access C(Direct); "
        "V(false) keeps only SSH open and the k3s API is reached through an SSH tunnel."))


def api_url(default: str) -> Dict[str, Any]:
    """The base URL of a REST API (tests, proxies and regional endpoints point it elsewhere)."""
    return dict(type="str", default=default, description=(
        "Base URL of the vendor's API; point it at a proxy, a regional endpoint or a test server."))


def api_key(*environment: str) -> Dict[str, Any]:
    """The API key of a REST API, never logged, read from ``environment`` when not given."""
    declared = dict(type="str", no_log=True, description="API key sent with every request (never logged).")
    if environment:
        declared["fallback"] = from_environment(*environment)
    return declared
