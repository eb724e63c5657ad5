"""No module of the package imports, directly or through others, a module that imports it.

Imports under ``TYPE_CHECKING`` count: a cycle that only the type checker sees still ties the
modules together (each must be read to understand the other). Read from the source with
``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

PACKAGE = ROOT / "otel_agent_profiler"


def _modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file; a package is its ``__init__.py``."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (``from package import module`` names the module)."""
    modules = _modules(package)

    def known(name: str) -> str | None:
        # ``from a.b import c``: c is a module, or a name defined in a.b (or in a package above it).
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        parent = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = parent.split(".")[: len(parent.split(".")) - node.level + 1]
                    base = ".".join([*above, *([node.module] if node.module else [])])
                for alias in node.names:
                    targets.add(known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in modules else known(base))
        graph[module] = {target for target in targets if target is not None and target != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


def test_imports_under_type_checking_relative_and_of_modules_by_name_count(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "",
        "model.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.compute import Part\n",
        "sub/__init__.py": "from . import compute\n",
        "sub/compute.py": "from ..model import Model\nimport pkg.sub\n",
        "other.py": "from pkg import model\n\ndef late() -> None:\n    from pkg.sub import compute\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source, encoding="utf-8")
    assert _import_graph(package) == {
        "pkg": set(),
        "pkg.model": {"pkg.sub.compute"},
        "pkg.sub": {"pkg.sub.compute"},
        "pkg.sub.compute": {"pkg.model", "pkg.sub"},
        "pkg.other": {"pkg.model", "pkg.sub.compute"},
    }
    assert sorted(map(sorted, _cycles(_import_graph(package)))) == [["pkg.model", "pkg.sub", "pkg.sub.compute"]]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_module_of_the_package_is_part_of_an_import_cycle() -> None:
    found = [sorted(cycle) for cycle in _cycles(_import_graph())]
    assert not found, f"import cycles: {found}"
