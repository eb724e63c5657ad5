"""The package tree is the architecture the documentation describes: its parts, and which part may use which.

The table of docs/architecture.md ("How it is built") is the source of truth. Each row names a package or a top-level
module and the parts it may import; these tests hold the tree and the imports to it, and keep the
installed package small and free of test infrastructure.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "otel_agent_profiler"
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
# Anyone may read the version.
EVERYONE_MAY_USE = {"_version"}
MAX_TOP_LEVEL_MODULES = 6
MAX_MODULE_LINES = 700


def _layout_table() -> dict[str, set[str] | None]:
    """Part name -> the parts it may use (None: any part)."""
    section = ARCHITECTURE.split("# How it is built", 1)[1].split("\n## ", 1)[0]
    parts: dict[str, set[str] | None] = {}
    for row in re.findall(r"^\| `([^`]+)` \|[^|]*\|([^|]*)\|$", section, re.M):
        name, may_use = row[0].removesuffix("/").removesuffix(".py"), row[1].strip()
        parts[name] = None if may_use == "anything" else set(re.findall(r"`([^`]+)`", may_use))
    assert parts, 'docs/architecture.md has no "How it is built" table'
    return parts


def _parts_in_tree() -> set[str]:
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__main__", "_version"}
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    return modules | packages


def _part_of(module: str) -> str:
    """``otel_agent_profiler.live.attributes`` -> ``live``; the package itself is ``__init__``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _imports(path: Path) -> list[str]:
    """Absolute names of everything ``path`` imports, relative imports resolved."""
    relative = path.relative_to(ROOT).with_suffix("").parts
    package = list(relative[:-1])
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
                continue
            base = ".".join(package[: len(package) - node.level + 1])
            if node.module:
                names.append(f"{base}.{node.module}")
            else:  # ``from . import x``: x may be a module of that package
                names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def test_readme_describes_every_part_of_the_package_and_nothing_else() -> None:
    assert set(_layout_table()) == _parts_in_tree()


@pytest.mark.parametrize("part", sorted(_layout_table()))
def test_each_part_uses_only_what_readme_allows(part: str) -> None:
    allowed = _layout_table()[part]
    if allowed is None:
        return
    files = [PACKAGE / f"{part}.py"] if (PACKAGE / f"{part}.py").is_file() else sorted((PACKAGE / part).rglob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            if not name.startswith("otel_agent_profiler"):
                continue
            used = _part_of(name)
            assert used in {part, *allowed, *EVERYONE_MAY_USE}, (
                f"{path.relative_to(ROOT)} imports {name}; docs/architecture.md lets {part} use only {sorted(allowed)}"
            )


def test_the_core_imports_only_the_standard_library_and_itself() -> None:
    core_files = sorted((PACKAGE / "core").rglob("*.py"))
    assert core_files
    for path in core_files:
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "otel_agent_profiler":
                assert name.startswith("otel_agent_profiler.core"), f"{path.name} imports {name}"
            else:
                assert top in sys.stdlib_module_names, f"{path.name} imports {name}"
                assert top != "opentelemetry"


# Input conventions the core understands, as it understands the GenAI ones: a category a user
# forces on a span, the chunk event our decorators write, and the group of tool calls a user
# declares independent of each other.
CORE_INPUT_CONVENTIONS = {"agent_profiler.category", "agent_profiler.chunk", "agent_profiler.independent_group"}


def test_the_core_spells_none_of_our_wire_format_but_its_input_conventions() -> None:
    # What the profiler records on spans for itself (costs, servers' load) is spelled in
    # adapters/recorded_attributes.py and read through core.recorded; docstrings count too.
    core_files = sorted((PACKAGE / "core").rglob("*.py"))
    found: set[str] = set()
    for path in core_files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                # ``otel_agent_profiler.core...`` in a docstring is a module, not an attribute.
                words = {word.rstrip(".") for word in re.findall(r"(?<!\w)agent_profiler\.[\w.*]*", node.value)}
                unexpected = words - CORE_INPUT_CONVENTIONS
                assert not unexpected, f"{path.relative_to(ROOT)} spells {sorted(unexpected)}"
                found |= words
    assert found == CORE_INPUT_CONVENTIONS


def test_the_import_resolver_sees_relative_imports() -> None:
    # The purity checks above rely on it: a relative import out of the core must be caught.
    processor = PACKAGE / "plugin" / "processor.py"
    assert "otel_agent_profiler.live.profiling" in _imports(processor)


def test_the_top_level_is_small_and_no_module_is_long() -> None:
    top_level = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, top_level
    for path in PACKAGE.rglob("*.py"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_nothing_in_the_package_imports_the_demo_or_the_tests() -> None:
    for path in PACKAGE.rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] not in {"demo", "tests", "backends", "pytest"}, f"{path} imports {name}"


@pytest.mark.e2e
def test_the_wheel_carries_the_package_and_no_test_infrastructure(tmp_path: Path) -> None:
    import subprocess
    import zipfile

    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = tmp_path.glob("otel_agent_profiler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {name: archive.read(name).decode("utf-8") for name in names if name.endswith(".py")}
    assert all(name.startswith(("otel_agent_profiler/", "otel_agent_profiler-")) for name in names), names
    assert "otel_agent_profiler/py.typed" in names
    assert "otel_agent_profiler/plugin/processor.py" in sources
    for name, text in sources.items():
        assert "FakeOpenAIServer" not in text, f"{name}: the fake LLM server belongs to the repository, not the wheel"
        assert "import pytest" not in text, name
        assert len(text.splitlines()) <= MAX_MODULE_LINES, name
