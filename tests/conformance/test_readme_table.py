"""The documentation's table of frameworks (docs/frameworks.md) says what the conformance suite checks, and stays so.

The table ("## Frameworks and instrumentations it was checked with") has one row per source of the suite
(``SOURCES``), names the versions that source's environment pins, says for the token and time-to-first-token
columns what the harness expects of the source's instrumentation (``harness.PRODUCERS``), and lists the
suite's known gaps of the source. These tests read the suite statically: they run no framework, so they run
with the fast tests, not only with the conformance suite.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

import pytest

from tests.conformance import test_conformance
from tests.conformance.harness import MODES, PRODUCERS, Source
from tests.conformance.test_conformance import SOURCES
from tests.support.paths import ROOT

SECTION = "# Frameworks and instrumentations it was checked with"
NAME_COLUMN = "name in the suite"
VERSIONS_COLUMN = "source (versions checked)"
GAPS_COLUMN = "the suite's known gaps"

#: What a reader calls each of the suite's checks (the known-gaps column names them so).
CHECKS = {
    "test_categories": "categories",
    "test_critical_path_takes_the_slowest_parallel_tool": "critical path",
    "test_tool_calls_counted_once": "tool calls",
    "test_tokens_per_model_each_call_once": "tokens",
    "test_llm_calls_counted_once": "LLM calls",
    "test_time_to_first_token_of_the_stream": "time to first token",
    "test_top_finding_names_what_takes_the_time": "top finding",
    "test_live_attributes_match_the_offline_analysis": "live attributes",
    "test_command_line_reads_the_exported_file_alike": "`analyze` of the exported file",
}

#: Environments that take the OpenTelemetry and openai their framework brings, not constraints.txt's
#: (scripts/_frameworks.sh installs them with the "framework's" versions).
OWN_OPENTELEMETRY = frozenset({"adk", "strands"})

#: How the table names a package whose distribution name it does not spell out.
SPOKEN_NAMES = {"opentelemetry sdk": "opentelemetry-sdk", "instrumentation": "opentelemetry-instrumentation"}
NAMED_VERSION = re.compile(
    r"(OpenTelemetry SDK|[A-Za-z][\w.-]*)(?:\[[\w,]+\])? (\d+\.\d+(?:\.\d+)?(?:[ab]\d+)?)(?![\w.])"
)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def readme_section() -> str:
    page = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    assert SECTION in page
    return page.split(SECTION, 1)[1].split("\n## ", 1)[0]


def readme_rows() -> dict[str, dict[str, str]]:
    """The table's rows by the source's name in the suite."""
    lines = [line for line in readme_section().splitlines() if line.startswith("|")]
    header = _cells(lines[0])
    rows: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        row = dict(zip(header, _cells(line), strict=True))
        name = row[NAME_COLUMN].strip("`")
        assert name not in rows, f"two rows for {name}"
        rows[name] = row
    return rows


def _distribution(name: str) -> str:
    name = name.lower()
    return SPOKEN_NAMES.get(name, re.sub(r"\[.*\]", "", name).replace("_", "-"))


def _pins_file(path_name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / path_name).read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[_distribution(name.strip())] = version.strip()
    return pins


def pinned_versions(source: Source) -> dict[str, str]:
    """The versions ``source``'s environment installs, as scripts/_frameworks.sh pins them."""
    pins = {} if source.venv in OWN_OPENTELEMETRY else _pins_file("constraints.txt")
    if source.venv != "main":  # the test suite's own environment: constraints.txt alone
        pins.update(_pins_file(f"tests/conformance/pins-{source.venv}.txt"))
    return pins


def known_gaps_cell(gaps: Mapping[str, tuple[bool, str]]) -> str:
    """The known-gaps column of a source: each check that fails, in which modes, every run or some."""
    parts = []
    for test, check in CHECKS.items():
        modes = [mode for mode in MODES if test in gaps or f"{test}[{mode}]" in gaps]
        if not modes:
            continue
        strict = {gaps.get(test, gaps.get(f"{test}[{mode}]", (False, "")))[0] for mode in modes}
        where = "all modes" if modes == list(MODES) else ", ".join(modes)
        runs = "every run" if strict == {True} else "some runs"
        parts.append(f"{check} ({where}; {runs})")
    return "; ".join(parts) or "none"


def test_every_known_gap_names_a_check_of_the_suite() -> None:
    tests = {name for name, _ in inspect.getmembers(test_conformance, inspect.isfunction) if name.startswith("test_")}
    assert set(CHECKS) == tests, "CHECKS names every test of the conformance suite"
    for source in SOURCES:
        for key in source.known_gaps:
            test, _, mode = key.partition("[")
            assert test in CHECKS and mode.rstrip("]") in ("", *MODES), (source.name, key)


def test_the_table_has_one_row_per_source_of_the_suite() -> None:
    assert sorted(readme_rows()) == sorted(source.name for source in SOURCES)


@pytest.mark.parametrize("source", SOURCES, ids=[source.name for source in SOURCES])
def test_the_row_names_the_versions_its_environment_pins(source: Source) -> None:
    named = NAMED_VERSION.findall(readme_rows()[source.name][VERSIONS_COLUMN])
    assert named, "the row names the versions checked"
    pins = pinned_versions(source)
    for name, version in named:
        pinned = pins.get(_distribution(name))
        assert pinned == version, f"the row names {name} {version}, its environment pins {pinned}"
    names = {_distribution(name) for name, _ in named}
    # the section's opening names the project's OpenTelemetry and openai, "unless noted": a row notes others
    if pins.get("openai") != _pins_file("constraints.txt")["openai"]:
        assert "openai" in names, "the row names its environment's openai"
    if source.venv in OWN_OPENTELEMETRY:
        assert {"opentelemetry-sdk", "opentelemetry-instrumentation"} <= names


def test_the_section_names_the_project_versions() -> None:
    pins = _pins_file("constraints.txt")
    expected = (
        f"OpenTelemetry SDK {pins['opentelemetry-sdk']} / instrumentation {pins['opentelemetry-instrumentation']} "
        f"(`constraints.txt`), openai {pins['openai']} unless noted"
    )
    assert expected in " ".join(readme_section().split())


@pytest.mark.parametrize("source", SOURCES, ids=[source.name for source in SOURCES])
def test_the_row_says_what_the_suite_expects_of_the_source(source: Source) -> None:
    """Cached and reasoning tokens and the time to first token read "yes" where the suite expects the
    source's instrumentation to record them and "no" where it expects nothing; a check the suite knows
    fails there is explained in its own words instead."""
    row = readme_rows()[source.name]
    records = PRODUCERS[source.producer]
    reasoning = "plain calls only" if records.reasoning and not records.stream_reasoning else records.reasoning
    failing = {key.partition("[")[0] for key in source.known_gaps}
    columns = {
        "cached input tokens": (records.cached, "test_tokens_per_model_each_call_once"),
        "reasoning tokens": (reasoning, "test_tokens_per_model_each_call_once"),
        "time to first token": (records.ttft, "test_time_to_first_token_of_the_stream"),
    }
    for column, (expected, test) in columns.items():
        word = expected if isinstance(expected, str) else ("yes" if expected else "no")
        cell = row[column]
        if test in failing and not cell.startswith(word):
            continue  # the cell says what goes wrong
        assert cell.startswith(word), f"{column}: {cell!r}; the suite expects {word!r}"
    assert row[GAPS_COLUMN] == known_gaps_cell(source.known_gaps)
