"""One ranked list of findings per trace: folded, without noise, each saying where and what to change,
and their combined projection. On the demo's trace (tests/data/demo_trace.otlp.json, recorded from
``python -m demo``) and on small built traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_agent_profiler.cli import main
from otel_agent_profiler.core.findings import (
    BOTTLENECK,
    PARALLELIZABLE,
    SLOW_TOOL,
    FindingOptions,
    combined_projection,
    find_all,
    find_bottlenecks,
    find_parallelization,
    find_slow_tools,
)
from otel_agent_profiler.core.projection import projected_duration_ns
from otel_agent_profiler.offline import load_profiles
from otel_agent_profiler.report import render_traces
from otel_agent_profiler.report.html import trace_view_data
from tests.core.test_findings import MS, agent, llm, tool
from tests.support.paths import DATA
from tests.support.span_builders import profile, sid, span

DEMO = DATA / "demo_trace.otlp.json"


@pytest.fixture(scope="module")
def demo():
    (trace,) = load_profiles([str(DEMO)]).profiles
    return trace


def test_demo_findings_share_no_span_within_a_kind_and_fold_the_span_level_ones(demo) -> None:
    findings = find_all(demo)
    for kind in {f.kind for f in findings}:
        ids = [i for f in findings if f.kind == kind for i in f.span_ids]
        assert len(ids) == len(set(ids)), kind
    first = findings[0]
    assert first.kind == BOTTLENECK and first.operation == "gpt-4o-mini" and len(first.span_ids) == 3
    assert first.title.startswith("The 3 gpt-4o-mini calls hold 1.73 s of the critical path (42%)")
    # The span-level finding about the longest call is a detail, not a second finding.
    assert [d["kind"] for d in first.details] == [BOTTLENECK]
    assert first.details[0]["title"].startswith("The gpt-4o-mini call 'openai.chat' at 3.25 s holds 819 ms")
    # The sentence is gone.
    assert not any("2x faster" in f.title or "0 ns sooner" in f.title for f in findings)


def test_demo_findings_say_where_and_what(demo) -> None:
    for finding in find_all(demo):
        assert finding.suggestion, finding.title
        assert finding.where, finding.title
        assert [w["span_id"] for w in finding.where] == sorted(
            finding.span_ids, key=lambda i: next(w["start_offset_ns"] for w in finding.where if w["span_id"] == i)
        )
        for location in finding.where:
            assert set(location) == {"span_id", "name", "category", "operation", "start_offset_ns", "duration_ns"}
    suggestions = {f.kind: f.suggestion for f in reversed(find_all(demo))}
    # No model is smaller than gpt-4o-mini: the suggestion is about the calls, not the model.
    assert "Send gpt-4o-mini shorter prompts" in suggestions[BOTTLENECK]
    assert "Stream the answer" in suggestions["llm_timing"]
    assert "Reuse the shared prompt prefix" in suggestions["prefix_cache"]


def test_demo_noise_floor_is_configurable(demo) -> None:
    default = find_all(demo)
    everything = find_all(demo, FindingOptions(min_saving=0))
    # The parallelizable pair saves 5.47 ms of 4.07 s: under 1%, listed only without a floor.
    assert PARALLELIZABLE not in {f.kind for f in default}
    (parallel,) = [f for f in everything if f.kind == PARALLELIZABLE]
    assert 0 < parallel.saving_ns < 0.01 * demo.duration_ns
    assert "instead of" not in parallel.title
    assert parallel.title.endswith("would end the trace 5.47 ms sooner (under 1% of it).")
    assert parallel.suggestion == "Run run_sql and calculator together, with asyncio.gather or a thread pool."
    floor = 0.01 * demo.duration_ns
    assert all(f.saving_ns >= floor or (f.saving_ns == 0 and f.suggestion) for f in default)


def test_demo_combined_projection_is_recomputed_on_the_tree(demo) -> None:
    findings = find_all(demo)
    combined = combined_projection(demo, findings)
    # The three bottlenecks twice as fast, together: less than the sum of their "2x" savings.
    halved = {i for f in findings if f.kind == BOTTLENECK for i in f.span_ids}
    expected = projected_duration_ns(demo, lambda s: 0.5 if s.record.span_id in halved else 1.0)
    assert combined.changes == 3
    assert combined.projected_duration_ns == expected
    assert combined.saving_ns <= sum(f.evidence["saving_if_2x_faster_ns"] for f in findings if f.kind == BOTTLENECK)
    assert combined.to_dict() == {
        "duration_ns": demo.duration_ns,
        "projected_duration_ns": expected,
        "saving_ns": demo.duration_ns - expected,
        "changes": 3,
    }


def test_demo_text_report_reads_as_sentences(demo) -> None:
    text = render_traces([demo], findings={demo.trace_id: find_all(demo)})
    section = text[text.index("What to change") : text.index("Span tree")]
    assert (
        "Made together, these changes would end the trace 1.68 s sooner (41% of its 4.07 s), "
        "assuming each slow step becomes twice as fast."
    ) in " ".join(line.strip() for line in section.splitlines())
    assert "  1. The 3 gpt-4o-mini calls hold 1.73 s of the critical path (42%): removing" in section
    assert "     Where: 'openai.chat' (gpt-4o-mini) at 51.9 ms, 1.09 s and 3.25 s." in section
    assert "     Suggestion: Send gpt-4o-mini shorter prompts, or make fewer calls: its" in section
    # Folded findings are in the JSON, not announced in text that never shows them.
    assert "smaller finding" not in section
    assert "bottleneck:" not in section and "(0%)" not in section
    assert all(len(line) <= 80 for line in text.splitlines())


def test_a_tiny_bottleneck_is_noise_and_says_under_1_percent() -> None:
    # A 41 µs tool on the critical path of a 1.25 s trace.
    tiny = span(
        "tiny",
        "root",
        1200 * MS,
        1200 * MS + 41_000,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
    )
    trace = profile([agent("root", None, 0, 1250), llm("llm1", "root", 0, 1200), tiny])
    (found,) = [f for f in find_bottlenecks(trace, FindingOptions(top_n=5)) if f.operation == "lookup"]
    assert 0 < found.saving_ns < 0.01 * trace.duration_ns
    assert "(under 1%)" in found.title and "(0%)" not in found.title
    assert found.span_ids not in [f.span_ids for f in find_all(trace, FindingOptions(top_n=5))]
    assert found.span_ids in [f.span_ids for f in find_all(trace, FindingOptions(top_n=5, min_saving=0))]


def test_a_slow_tool_beside_longer_work_saves_nothing_and_is_left_out() -> None:
    records = [
        agent("root", None, 0, 3000),
        llm("llm1", "root", 0, 3000),
        tool("slow", "root", 0, 1500, "slow_api"),
    ]
    trace = profile(records)
    (slow,) = [f for f in find_slow_tools(trace) if f.kind == SLOW_TOOL]
    assert slow.saving_ns == 0 and slow.suggestion is None
    assert slow.title == (
        "Tool slow_api took 1.50 s itself (50% of the trace), but beside longer work: "
        "making it faster would not end the trace sooner."
    )
    assert all(f.kind != SLOW_TOOL for f in find_all(trace, FindingOptions(min_saving=0)))


def test_a_slow_tool_and_its_bottleneck_are_one_finding() -> None:
    records = [agent("root", None, 0, 2000), llm("llm1", "root", 0, 100), tool("fetch", "root", 100, 1900, "web")]
    findings = find_all(profile(records))
    about_fetch = [f for f in findings if sid("fetch") in f.span_ids]
    assert len(about_fetch) == 1
    assert {about_fetch[0].kind, *(d["kind"] for d in about_fetch[0].details)} == {BOTTLENECK, SLOW_TOOL}


def test_parallelizable_title_never_reads_x_instead_of_x() -> None:
    # 136 s trace; two 400 ms tools one after another: the saving rounds away in "136 s".
    records = [
        agent("root", None, 0, 136_000),
        tool("a", "root", 0, 400, "search"),
        tool("b", "root", 400, 800, "fetch"),
        llm("llm1", "root", 800, 136_000),
    ]
    (finding,) = find_parallelization(profile(records))
    assert finding.saving_ns == 400 * MS
    assert "instead of" not in finding.title and "400 ms sooner" in finding.title


def test_html_findings_carry_suggestion_where_and_the_combined_projection(demo) -> None:
    data = trace_view_data(demo, find_all(demo))
    first = data["findings"][0]
    assert first["suggestion"].startswith("Send gpt-4o-mini shorter prompts")
    assert first["where"][0] == ["'openai.chat' (gpt-4o-mini) at 51.9 ms", first["span_ids"][0]]
    assert "details" not in first
    assert data["combined"].startswith("Made together, these changes would end the trace 1.68 s sooner")


def test_cli_min_saving_flag_and_json_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    assert main(["analyze", str(DEMO), "--format", "json", "--findings", "--output", str(out)]) == 0
    (trace,) = json.loads(out.read_text())["traces"]
    assert {"suggestion", "where", "details", "span_ids", "saving_ns"} <= set(trace["findings"][0])
    assert trace["combined_projection"]["changes"] == 3
    assert PARALLELIZABLE not in {f["kind"] for f in trace["findings"]}
    args = ["analyze", str(DEMO), "--format", "json", "--findings", "--min-saving", "0%", "--output", str(out)]
    assert main(args) == 0
    assert PARALLELIZABLE in {f["kind"] for f in json.loads(out.read_text())["traces"][0]["findings"]}
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(DEMO), "--min-saving", "150%"])
    assert exit_info.value.code == 2
    assert "must be from 0% to 100%" in capsys.readouterr().err


def test_where_counts_the_times_left_out_in_words() -> None:
    from otel_agent_profiler.core.findings.base import describe_where

    def places(count: int) -> list[dict[str, object]]:
        return [
            {"name": "openai.chat", "operation": "gpt-4o", "start_offset_ns": (i + 1) * 10**9} for i in range(count)
        ]

    assert describe_where(places(5)).endswith("4.00 s and 1 more time")
    assert describe_where(places(7)).endswith("4.00 s and 3 more times")


def test_the_combined_sentence_names_only_the_changes_it_made() -> None:
    # Two tools one after another with nothing recorded about their data: the parallelization is a
    # hedged note left out of the combined projection, so its sentence must not assume it.
    records = [
        agent("root", None, 0, 1000),
        tool("first", "root", 0, 600, "fetch_prices"),
        tool("second", "root", 600, 1000, "summarize"),
    ]
    trace = profile(records)
    findings = find_all(trace)
    assert {f.rests_on for f in findings if f.kind == "parallelizable"} == {"assumed: no recorded data flow"}
    text = " ".join(line.strip() for line in render_traces([trace], findings={trace.trace_id: findings}).splitlines())
    assert "assuming each slow step becomes twice as fast." in text
    assert "start together" not in text.split("Made together", 1)[1].split(".", 1)[0]
