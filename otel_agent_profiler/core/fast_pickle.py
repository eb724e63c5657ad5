"""Pickling the analysis's small value objects as calls of their class with their fields.

Worker processes send each trace's totals and findings back pickled (``workers.py``). On
Python 3.11, a dataclass with ``slots=True`` is pickled through ``__getstate__`` and
``__setstate__`` written in Python, a dozen calls per object: for the totals of 8,000 traces,
several seconds each way, more than profiling them took. Reduced to ``(cls, fields)``, the
object is rebuilt by one call of its class, and pickle stays in C for the rest.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, TypeVar

Cls = TypeVar("Cls", bound=type)


def pickled_by_fields(cls: Cls) -> Cls:
    """Class decorator, applied above ``@dataclass``: pickle instances as ``cls(*fields)``.

    Every field must be an ``__init__`` parameter, in declaration order (the dataclass default).
    """
    fields = dataclasses.fields(cls)
    if any(not field.init for field in fields):
        raise TypeError(f"{cls.__name__}: every field must be an __init__ parameter to be pickled by fields")
    names = tuple(field.name for field in fields)
    values: Callable[[Any], Any] = operator.attrgetter(*names)

    if len(names) == 1:

        def reduce_one(self: Any) -> tuple[type, tuple[Any, ...]]:
            return cls, (values(self),)

        cls.__reduce__ = reduce_one  # type: ignore[assignment,method-assign]
    else:

        def reduce_many(self: Any) -> tuple[type, tuple[Any, ...]]:
            return cls, values(self)

        cls.__reduce__ = reduce_many  # type: ignore[assignment,method-assign]
    return cls
