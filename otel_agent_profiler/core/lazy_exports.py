"""A package's public names, each imported from its module on first use (PEP 562).

Importing a package then loads only the modules whose names are used: the command line's
`--help` reads one constant of the core without loading the analysis, and a command that writes
one rendering does not load the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_attributes(
    package: str, exported_from: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose name ``N`` lives in module ``exported_from[N]``.

    ``namespace`` is the package's ``globals()``: a name, once imported, is kept there, so later
    lookups find it without calling ``__getattr__`` again.
    """

    def getattr_(name: str) -> Any:
        module = exported_from.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return getattr_, dir_
