# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The JSON round-trip every record of the provider contract has (base.py, capabilities.py): offers, locations
and prepared state travel inside journalled machine states."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, Type, TypeVar


RecordT = TypeVar("RecordT", bound="Record")


class Record:
    """JSON round-trip for the dataclasses below (each subclass is a dataclass)."""

    # Declared, never set here: @dataclass sets it on each subclass (what makes it a dataclass to a type checker).
    __dataclass_fields__: ClassVar[Dict[str, "dataclasses.Field[Any]"]]

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: Type[RecordT], data: Dict[str, Any]) -> RecordT:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
