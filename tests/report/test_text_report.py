"""The text report explains itself: categories in full, one mark for none, durations a person reads."""

from __future__ import annotations

import re

import pytest

from otel_agent_profiler.core.categories import CATEGORIES
from otel_agent_profiler.core.genai import TokenUsage
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.core.split_traces import SplitLLMCall
from otel_agent_profiler.offline import load_profiles
from otel_agent_profiler.report.cross_trace import split_calls_note
from otel_agent_profiler.report.text import UNICODE, WIDTH, _paragraph, render_trace
from tests.support.paths import ROOT
from tests.support.span_builders import profile, span

S = 1_000_000_000
EXAMPLE = ROOT / "examples" / "traces" / "research-agent.otlp.json"
NONE_LEGEND = "(- means none)"


@pytest.fixture(scope="module")
def example() -> TraceProfile:
    (trace,) = load_profiles([str(EXAMPLE)]).profiles
    return trace


def _section(report: str, title: str) -> list[str]:
    """The lines of the report's section whose title starts with ``title``, up to the blank line after it."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_the_span_tree_writes_each_category_in_full(example: TraceProfile) -> None:
    tree = _section(render_trace(example), "Span tree")
    column = tree[1].index("category")
    kinds = {row[column:].split()[0] for row in tree if row.startswith(" |")}
    # The example has every category but internal; "embed", "retr", "mem" and "-" were shown before.
    assert kinds == {"llm", "embedding", "tool", "agent", "retrieval", "memory"}
    assert kinds <= set(CATEGORIES)


def test_none_is_shown_one_way_and_explained(example: TraceProfile) -> None:
    report = render_trace(example, findings=())
    # Off the critical path, a span or an operation has no critical-path time: "-", never "0 ns".
    assert "0 ns" not in report
    tree = _section(report, "Span tree")
    off_path = [row for row in tree if row.startswith(" |") and "░" in row]
    assert off_path and all(re.search(r" - (tool|llm|agent)", row) for row in off_path)
    assert tree[-1].strip() == NONE_LEGEND


def test_the_tables_say_none_where_an_operation_holds_no_critical_path_time() -> None:
    records = [
        span("root", None, 0, 10 * S, attributes={"gen_ai.operation.name": "invoke_agent"}),
        span("slow", "root", 0, 10 * S, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"}),
        span("fast", "root", 0, 1 * S, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "b"}),
    ]
    report = render_trace(profile(records))
    operations = _section(report, "Top operations")
    (fast,) = [row for row in operations if row.split()[0] == "b"]
    # Its critical-path time and its share: none, with the legend under the table.
    assert fast.split()[-2:] == ["-", "-"]
    assert operations[-1].strip() == NONE_LEGEND
    assert "0 ns" not in report and "0.0%" not in fast


def test_a_trace_of_minutes_reads_in_minutes_and_keeps_its_columns() -> None:
    records = [
        span("root", None, 0, 136 * S, attributes={"gen_ai.operation.name": "invoke_agent"}),
        span(
            "chat",
            "root",
            1 * S,
            135 * S,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
        ),
        span("tool", "root", 0, S // 2, attributes={"gen_ai.operation.name": "execute_tool"}),
    ]
    report = render_trace(profile(records))
    assert report.splitlines()[1].startswith("  2 min 16 s")
    assert "136 s" not in report
    assert all(len(line) <= WIDTH for line in report.splitlines())
    tree = [row for row in _section(report, "Span tree") if row.startswith(" |")]
    # Every row's category starts in the same column, however long its times are written.
    columns = {row.index(word) for row in tree for word in ("agent ", "llm ", "tool ") if word in row}
    assert len(columns) == 1


def test_a_wrapped_sentence_never_splits_a_duration() -> None:
    sentence = "Made together, this change would end the trace 200 ms sooner (25% of its 800 ms), and 2 min 16 s"
    lines = _paragraph(sentence, "  ", "  ", UNICODE)
    assert len(lines) == 2
    assert lines[0].endswith("(25% of its") and lines[1].startswith("  800 ms")
    lines = _paragraph("x" * 66 + " then 2 min 16 s", "", "", UNICODE)
    assert lines[-1] == "2 min 16 s"


@pytest.mark.parametrize(
    ("traces", "calls", "words"),
    [
        (1, 1, "1 LLM-only trace repeats 1 LLM call of agent traces"),
        (1, 2, "1 LLM-only trace repeats 2 LLM calls of agent traces"),
        (2, 2, "2 LLM-only traces repeat 2 LLM calls of agent traces"),
    ],
)
def test_the_note_on_split_calls_reads_as_english(traces: int, calls: int, words: str) -> None:
    splits = [
        SplitLLMCall(f"{number % traces:032x}", f"{number:016x}", "a" * 32, "b" * 16, "gpt-4o", TokenUsage(10, 5), None)
        for number in range(calls)
    ]
    note = split_calls_note(splits)
    assert note is not None and note.startswith(words)
