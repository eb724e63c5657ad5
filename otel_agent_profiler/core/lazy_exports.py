"""A package's public names, each imported from its module on first use (PEP 562).

Importing a package then loads only the modules whose names are used: the command line's
`--help` reads one constant of the core without loading the analysis, and a command that writes
one rendering does not load the others.

A package states its names once at run time, as a table of module to names; its ``__all__`` is
derived from that table. Type checkers read the ``if TYPE_CHECKING:`` imports beside it instead
(``import name as name``, an explicit re-export, since they cannot see a computed ``__all__``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

NamesByModule = Mapping[str, tuple[str, ...]]


def exported_names(names_by_module: NamesByModule) -> list[str]:
    """The package's ``__all__``: every name of the table, sorted."""
    return sorted(name for names in names_by_module.values() for name in names)


def lazy_attributes(
    package: str, names_by_module: NamesByModule, namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``names_by_module[M]`` live in module ``M``.

    ``namespace`` is the package's ``globals()``: a name, once imported, is kept there, so later
    lookups find it without calling ``__getattr__`` again.
    """
    module_of = {name: module for module, names in names_by_module.items() for name in names}

    def getattr_(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return getattr_, dir_
