"""Which packages are public, what each exports, and that the rest says it is internal.

The public API is the package itself and the packages people import in README's "Use the analysis
core from Python": ``core``, ``adapters``, ``analytics`` and ``report``, plus ``errors`` for the
exceptions. Each public package's ``__all__`` is exactly what its ``__init__`` offers (as httpx's
tests/test_exported_members.py holds its own). Every other package is internal: its docstring
says so, and nothing in README tells users to import from it.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import otel_agent_profiler

PACKAGE = Path(otel_agent_profiler.__file__).resolve().parent
PUBLIC_PACKAGES = [
    "otel_agent_profiler.core",
    "otel_agent_profiler.adapters",
    "otel_agent_profiler.analytics",
    "otel_agent_profiler.report",
]
INTERNAL_MARK = "Internal:"


def _packages() -> list[str]:
    return sorted(f"otel_agent_profiler.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py"))


def _names_offered_by(module: types.ModuleType) -> set[str]:
    """Public names bound in the module's own ``__init__`` (imports and definitions), submodules excluded.

    Names imported under ``if TYPE_CHECKING:`` count: the package's ``__getattr__`` imports them on
    first use (``test_each_public_package_exports_exactly_what_it_offers`` resolves every one).
    """
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    names: set[str] = set()
    body = ast.parse(source).body
    for node in list(body):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            body.extend(node.body)
    for node in body:
        # Typing's names (TYPE_CHECKING, Any) are the module's tools, not what it offers.
        if isinstance(node, ast.ImportFrom) and node.module not in {"__future__", "typing"}:
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_each_public_package_exports_exactly_what_it_offers(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert exported == _names_offered_by(module), name
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None, f"{name}.{attribute}"


def test_the_errors_module_exports_every_class_it_defines() -> None:
    from otel_agent_profiler import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and value.__module__ == errors.__name__ and not name.startswith("_")
    }
    assert defined <= set(errors.__all__)


@pytest.mark.parametrize("name", _packages())
def test_every_other_package_says_it_is_internal(name: str) -> None:
    module = importlib.import_module(name)
    doc = module.__doc__ or ""
    if name in PUBLIC_PACKAGES:
        assert INTERNAL_MARK not in doc
    else:
        assert INTERNAL_MARK in doc, f"{name}: its docstring should say what is internal about it"
