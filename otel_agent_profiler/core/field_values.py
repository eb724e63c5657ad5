"""The JSON-ready form of a value object whose JSON is its fields: each by name, in declaration order.

Written once here rather than as a dict literal per class, a field added to such a class cannot be
left out of its JSON.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol


class DataclassInstance(Protocol):
    """Any dataclass instance (typeshed's own protocol, which the core may not import)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


def field_values(record: DataclassInstance) -> dict[str, Any]:
    """``record``'s fields by name, in declaration order, the values as they are (not copied, not converted)."""
    return {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
