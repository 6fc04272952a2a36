"""Every journalled dataclass (a dataclass under plugins/module_utils with ``to_dict`` and ``from_dict``)
round-trips through JSON with every field set: to_dict -> json.dumps -> json.loads -> from_dict gives an
equal record. The fields come from ``dataclasses.fields``, so a field added later is covered (and a value
this test cannot make for its type fails here, naming it)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pathlib
import typing

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import base

MODULE_UTILS = pathlib.Path(base.__file__).resolve().parent.parent
PACKAGE = "ansible_collections.gpuprov.cloud.plugins.module_utils"


def journalled_classes():
    """The dataclasses defined under module_utils that have to_dict and from_dict."""
    found = {}
    for path in sorted(MODULE_UTILS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "dataclass" not in text:
            continue
        name = ".".join((PACKAGE,) + path.relative_to(MODULE_UTILS).with_suffix("").parts).replace(".__init__", "")
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == name
                    and callable(getattr(value, "to_dict", None)) and callable(getattr(value, "from_dict", None))):
                found["%s.%s" % (name.rsplit(".", 1)[-1], value.__name__)] = value
    return found


CLASSES = journalled_classes()


def _default(field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


# Fields whose value must agree with another field's: (class name, field) -> a maker of the value.
# A Reconciling state's ``previous`` is a state of the ``previous_kind`` machine.
AGREEING = {
    ("Reconciling", "previous"): lambda: full(CLASSES["teardown_states.AwaitingGone"]),
    ("Reconciling", "previous_kind"): lambda: "teardown",
}


def value_for(kind, name, default):
    """A JSON-able value of type ``kind`` for field ``name``, unlike ``default``."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        # A union of records (the states a field may hold): the first of them stands for all
        # (each has its own round trip here).
        return value_for(inner[0], name, default)
    if origin is typing.Literal:
        return args[-1] if args[-1] != default else args[0]
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return full(kind)
    if kind is bool:
        return not default if isinstance(default, bool) else True
    if kind is int:
        return (default if isinstance(default, int) else 0) + 7
    if kind is float:
        return (default if isinstance(default, (int, float)) else 0.0) + 1.5
    if kind is str:
        return "%s-set" % name
    if origin in (dict, typing.Dict):
        key_type, item_type = args
        assert key_type is str, name
        if item_type is typing.Any:
            return {"%s-key" % name: [1, "two", {"three": 3.5, "four": None, "five": True}]}
        return {"%s-key" % name: value_for(item_type, name + "-item", None)}
    if origin in (list, typing.List):
        (item_type,) = args
        return [value_for(item_type, name + "-item", None), value_for(item_type, name + "-other", None)]
    pytest.fail("%s: the round-trip test makes no value of type %r; teach value_for" % (name, kind))


def full(cls):
    """An instance of ``cls`` with every field set to a value that is not its default."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        agreeing = AGREEING.get((cls.__name__, field.name))
        values[field.name] = agreeing() if agreeing else value_for(
            hints[field.name], "%s.%s" % (cls.__name__, field.name), _default(field))
    made = cls(**values)
    for field in dataclasses.fields(cls):
        default = _default(field)
        assert default is dataclasses.MISSING or getattr(made, field.name) != default, (
            "%s.%s is left at its default" % (cls.__name__, field.name))
    return made


def test_the_journalled_records_are_found():
    names = {name.rsplit(".", 1)[-1] for name in CLASSES}
    assert {"Location", "SshEndpoint", "Observed", "Owned", "Offer", "ResourceRequest", "BootScript",
            "InstanceSpec", "Capabilities"} <= names, sorted(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_record_with_every_field_set_round_trips_through_json(name):
    cls = CLASSES[name]
    made = full(cls)
    data = json.loads(json.dumps(made.to_dict()))
    back = cls.from_dict(data)
    assert back == made
    assert back.__class__ is cls
    for field in dataclasses.fields(cls):   # the nested records come back as records, not dicts
        assert getattr(back, field.name).__class__ is getattr(made, field.name).__class__, field.name


def test_observed_keeps_its_error_classification():
    seen = base.Observed(instance_id="i-1", status=base.Status.FAILED, reason="no hosts",
                         error_kind=base.ErrorKind.CAPACITY, error_block=base.BlockScope.REGION)
    back = base.Observed.from_dict(json.loads(json.dumps(seen.to_dict())))
    assert (back.error_kind, back.error_block) == (base.ErrorKind.CAPACITY, base.BlockScope.REGION)
    assert back == seen
