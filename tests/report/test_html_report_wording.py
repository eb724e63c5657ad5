"""The HTML report explains itself: what its largest saving assumes, one scroll, no sequence seen once.

Checked on the page as text and the JSON it embeds; ``test_html_report_browser.py`` checks what the
script draws (axis units, labels sized to their boxes) in a real browser.
"""

from __future__ import annotations

import re

from otel_agent_profiler.core.findings import REPEATED_TOOL_CALL, find_all
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.report.html import render_html, saving_assumption
from otel_agent_profiler.report.html_assets import JS
from otel_agent_profiler.report.summary import cross_run_statistics
from tests.report.test_html_report import EXAMPLE, embedded_data, profiles_of, runs_document
from tests.support.span_builders import profile, span

MS = 1_000_000


def _example() -> list[TraceProfile]:
    from otel_agent_profiler.offline import load_profiles

    return load_profiles([str(EXAMPLE)]).profiles


def test_the_largest_saving_says_what_it_assumes() -> None:
    traces = _example()
    (trace,) = traces
    findings = {trace.trace_id: find_all(trace)}
    page = render_html(traces, findings)
    best = embedded_data(page)["traces"][trace.trace_id]["largest_saving"]
    # The top finding holds 16.9 s of gpt-4o-mini calls: the figure is what removing all of it saves.
    assert best["kind"] == "bottleneck"
    assert best["ms"] == max(f.saving_ns for f in findings[trace.trace_id]) / MS
    assert best["assumes"] == "if the gpt-4o-mini calls took no time at all"
    # The table's figure carries it too, and a note under the table says it in words.
    assert re.search(r'<td class="num" title="if the gpt-4o-mini calls took no time at all">16\.9 s</td>', page)
    assert "Largest saving: what the trace's largest finding would save, on its own assumption" in page
    assert '"largest saving, " + best.assumes' in JS


def test_a_repeated_call_s_saving_assumes_it_is_made_once() -> None:
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": "{}"}
    trace = profile(
        [
            span("root", None, 0, 1000 * MS, attributes={"gen_ai.operation.name": "invoke_agent"}),
            span("s1", "root", 0, 400 * MS, attributes=tool),
            span("s2", "root", 500 * MS, 900 * MS, attributes=tool),
        ]
    )
    (repeated,) = [f for f in find_all(trace) if f.kind == REPEATED_TOOL_CALL]
    assert saving_assumption(repeated) == "if each repeated call were made once"


def test_findings_and_waterfall_scroll_with_the_page() -> None:
    traces = _example()
    page = render_html(traces, {t.trace_id: find_all(t) for t in traces})
    # No box of their own with a height limit to cut a row in half: the page is the one scroll.
    assert '<div id="findings"></div>' in page
    assert re.search(r'<div class="wide" id="waterfall"></div>', page)
    assert re.search(r"\.wide \{[^}]*overflow-x: auto", page) and not re.search(r"\.wide \{[^}]*max-height", page)


def test_the_time_axis_has_one_unit() -> None:
    # The category chart's axis title said "ms/s"; each axis now writes its ticks in one unit.
    assert "ms/s" not in JS
    assert "function timeUnit(step, max)" in JS


def test_only_sequences_several_runs_took_are_listed() -> None:
    runs = profiles_of(runs_document(12))
    statistics = cross_run_statistics(runs)
    assert statistics is not None
    counts = [row["count"] for row in statistics["sequences"]]
    # The synthetic runs take twelve different paths: every whole-run sequence occurs once.
    assert counts and set(counts) == {1}
    data = embedded_data(render_html(runs, {}, statistics=statistics))
    assert data["statistics"]["sequences"] == []
    assert "No run took the same sequence of calls as another." in JS
    repeated = {**statistics, "sequences": [{**statistics["sequences"][0], "count": 3}, *statistics["sequences"][1:]]}
    shown = embedded_data(render_html(runs, {}, statistics=repeated))["statistics"]["sequences"]
    assert [row["count"] for row in shown] == [3]
