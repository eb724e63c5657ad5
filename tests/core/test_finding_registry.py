"""The finding registry: every kind is registered once, with every piece the ranking and the reports read.

A kind that lacks a piece fails here rather than falling back, unnoticed, to a generic sentence in
the report of many traces or to no change in the combined projection.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import string
from pathlib import Path
from types import ModuleType

import pytest

from otel_agent_profiler.core import findings as findings_package
from otel_agent_profiler.core.findings import (
    BY_KIND,
    FINDERS,
    KINDS,
    REGISTRY,
    Change,
    Finding,
    FindingKind,
    FindingOptions,
    Grouping,
)
from otel_agent_profiler.core.findings.kinds import PLACEHOLDERS
from otel_agent_profiler.core.findings.rests_on import MEASURED_TIMES
from otel_agent_profiler.report import cross_trace
from tests.core.test_findings import CHAIN, PROMPTS, REPEAT, SLOW, SUPPORT, TOKENS, TRAVEL
from tests.support.span_builders import profile

MS = 1_000_000


def _finding_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{findings_package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(findings_package.__path__)
    ]


def test_every_kind_is_registered_once_in_its_order() -> None:
    assert len(set(KINDS)) == len(KINDS) == len(REGISTRY)
    assert tuple(record.kind for record in REGISTRY) == KINDS
    assert all(BY_KIND[record.kind] is record for record in REGISTRY)


def test_every_record_a_finder_module_declares_is_registered() -> None:
    declared = {
        (module.__name__, name): value
        for module in _finding_modules()
        for name, value in vars(module).items()
        if isinstance(value, FindingKind)
    }
    unregistered = [name for name, record in declared.items() if record not in REGISTRY]
    assert not unregistered, f"declared but not in registry.REGISTRY: {unregistered}"


def _kind_names_in_findings(path: Path) -> set[str]:
    """The names passed as ``kind=`` to ``Finding(...)`` in a module, and the kind constants it defines
    (``NAME = "name"``, the finder modules' convention)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        keyword.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Finding"
        for keyword in node.keywords
        if keyword.arg == "kind" and isinstance(keyword.value, ast.Name)
    }
    names |= {
        node.targets[0].id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and node.value.value == node.targets[0].id.lower()
    }
    return names


@pytest.mark.parametrize("module", _finding_modules(), ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_every_kind_a_finder_module_names_is_registered(module: ModuleType) -> None:
    assert module.__file__ is not None
    for name in _kind_names_in_findings(Path(module.__file__)):
        value = getattr(module, name, None)
        if isinstance(value, str):  # a local variable (a loop over kinds) is not a module constant
            assert value in BY_KIND, f"{module.__name__}.{name} = {value!r} is not registered"


@pytest.mark.parametrize("record", REGISTRY, ids=lambda record: record.kind)
def test_every_kind_has_every_piece(record: FindingKind) -> None:
    assert record.kind
    assert callable(record.finder) and record.finder in FINDERS
    assert isinstance(record.grouping, Grouping)
    assert isinstance(record.change, Change)
    assert record.across_traces.strip()
    # Folding is by a registered kind that folds by itself: families do not chain.
    assert BY_KIND[record.family_kind].family_kind == record.family_kind


@pytest.mark.parametrize("record", REGISTRY, ids=lambda record: record.kind)
def test_every_sentence_uses_only_the_words_its_grouping_gives(record: FindingKind) -> None:
    for sentence in (record.across_traces, record.across_traces_assumed or ""):
        used = {field for _, field, _, _ in string.Formatter().parse(sentence) if field is not None}
        assert used <= PLACEHOLDERS[record.grouping]


# A subject of each grouping, as the report of many traces makes it.
_SUBJECTS = {
    Grouping.KIND: (),
    Grouping.OPERATION: ("search_kb", "tool"),
    Grouping.SPAN_NAMES: ("execute_tool search_kb",),
    Grouping.BUDGET: ("tokens", "llm"),
}


@pytest.mark.parametrize("record", REGISTRY, ids=lambda record: record.kind)
def test_the_report_of_many_traces_says_each_kinds_own_sentence(record: FindingKind) -> None:
    group = cross_trace._Group(record.kind, _SUBJECTS[record.grouping], MEASURED_TIMES, {"t1": 5 * MS, "t2": 7 * MS})
    sentence = cross_trace._sentence(group, traces=2)
    assert sentence.startswith("In all 2 traces, ")
    placeholders = cross_trace._placeholders(record, group.subject, "'execute_tool search_kb'")
    assert set(placeholders) == PLACEHOLDERS[record.grouping]
    assert sentence.startswith("In all 2 traces, " + record.across_traces.format(**placeholders))


#: Options under which the test traces give findings of every kind (also used by test_findings_for_summary).
EVERY_KIND_OPTIONS = FindingOptions(
    what_ifs=[("tool:search_kb", 2.0), ("llm", 3.0)],
    budget_latency_ms=100,
    budget_tokens=10,
    category_budgets={"llm": {"tokens": 10}},
    slow_tool_ms=50,
    min_llm_chain=2,
)


@pytest.mark.parametrize("spans", [SUPPORT, SLOW, PROMPTS, REPEAT, CHAIN, TRAVEL, TOKENS])
def test_each_finder_finds_only_kinds_registered_with_it(spans: list) -> None:
    trace = profile(spans)
    for finder in FINDERS:
        found: list[Finding] = finder(trace, EVERY_KIND_OPTIONS)
        for finding in found:
            assert BY_KIND[finding.kind].finder is finder, f"{finding.kind} made by {finder.__name__}"
