"""analyze on many traces: a cross-trace summary first, then the slowest traces in detail."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.core.findings import Finding
from otel_agent_profiler.core.findings.rests_on import (
    ASSUMED_NO_RECORDED_FLOW,
    ESTIMATED_TIMING,
    MEASURED_TIMES,
    REQUESTED_TOGETHER,
)
from otel_agent_profiler.report.cross_trace import _sentence, aggregate_findings

TRACES = 20


@pytest.fixture(scope="module")
def twenty_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spans = [span for run in generate_runs(TRACES, seed=5) for span in run]
    path = tmp_path_factory.mktemp("runs") / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    return path


def _analyze(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["analyze", *argv]) == 0
    return capsys.readouterr().out


def _traces_in_detail(report: str) -> list[str]:
    return re.findall(r"^Trace ([0-9a-f]+)$", report, flags=re.MULTILINE)


def test_report_opens_with_the_summary_and_shows_three_slowest(
    twenty_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _analyze(capsys, str(twenty_traces))
    assert report.startswith(f"{TRACES} traces")
    assert "at the median" in report.split("\n", 3)[1]
    assert "Where the time went across traces" in report
    assert "Top operations across traces" in report
    assert "The 3 slowest traces in detail" in report
    detailed = _traces_in_detail(report)
    assert len(detailed) == 3
    assert len(report.splitlines()) <= 400


def test_detailed_traces_are_the_slowest_slowest_first(twenty_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(_analyze(capsys, str(twenty_traces), "--format", "json"))
    assert len(document["traces"]) == TRACES  # JSON keeps every trace
    by_duration = sorted(document["traces"], key=lambda trace: -trace["duration_ms"])
    report = _analyze(capsys, str(twenty_traces))
    assert _traces_in_detail(report) == [trace["trace_id"] for trace in by_duration[:3]]


def test_top_and_all_choose_how_many_traces_are_shown(twenty_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(_traces_in_detail(_analyze(capsys, str(twenty_traces), "--top", "5"))) == 5
    every = _analyze(capsys, str(twenty_traces), "--all")
    assert every.startswith(f"{TRACES} traces")
    assert len(_traces_in_detail(every)) == TRACES


def test_findings_are_aggregated_with_the_count_of_traces(
    twenty_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _analyze(capsys, str(twenty_traces))
    summary = report.split("The 3 slowest traces in detail")[0]
    assert "What to change across traces" in summary
    # Almost every generated run calls its LLMs one after another; the summary counts those traces.
    sentences = " ".join(summary.split())
    chains = re.findall(r"In (\d+) of 20 traces, the LLM calls [^.]* ran one after another", sentences)
    assert chains, summary
    assert max(int(count) for count in chains) >= TRACES // 2
    assert re.search(r"In \d+ of 20 traces, the gpt-4o calls", summary), summary
    assert re.search(r"In 19 of 20 traces, the gpt-4o calls held much of the critical path: a median of", sentences)


def test_a_few_traces_are_reported_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = [span for run in generate_runs(3, seed=5) for span in run]
    path = tmp_path / "three.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    report = _analyze(capsys, str(path))
    assert report.startswith("Trace ")
    assert "across traces" not in report
    assert len(_traces_in_detail(report)) == 3


def _wide_traces(path: Path, traces: int, children: int) -> Path:
    """``traces`` traces of a root with ``children`` tool calls one after another: long span trees."""
    spans = []
    for t in range(traces):
        trace_id = f"{t + 1:032x}"
        root = {"traceId": trace_id, "spanId": f"{t + 1:08x}00000000", "name": "invoke_agent wide",
                "startTimeUnixNano": str(1_760_000_000_000_000_000), "kind": 1,
                "endTimeUnixNano": str(1_760_000_000_000_000_000 + (children + t) * 1_000_000),
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}  # fmt: skip
        spans.append(root)
        for c in range(children):
            start = 1_760_000_000_000_000_000 + c * 1_000_000
            spans.append({"traceId": trace_id, "spanId": f"{t + 1:08x}{c + 1:08x}", "parentSpanId": root["spanId"],
                          "name": f"execute_tool step_{c}", "kind": 1, "startTimeUnixNano": str(start),
                          "endTimeUnixNano": str(start + 900_000),
                          "attributes": [
                              {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                              {"key": "gen_ai.tool.name", "value": {"stringValue": f"step_{c}"}}]})  # fmt: skip
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    return path


def test_the_default_report_is_fitted_to_400_lines_by_cutting_the_span_trees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _wide_traces(tmp_path / "wide.json", traces=12, children=150)
    # Three traces of 151 spans fit with 60 spans each: nothing is cut beyond --max-spans' default.
    report = _analyze(capsys, str(path))
    assert len(report.splitlines()) <= 400
    assert report == _analyze(capsys, str(path), "--max-spans", "60")
    assert report.count("91 more spans, 91 of them on the critical path (--max-spans N shows more)") == 3
    # Five do not: their trees give way, each still there with a note saying how to see more.
    report = _analyze(capsys, str(path), "--top", "5")
    assert len(_traces_in_detail(report)) == 5
    assert len(report.splitlines()) <= 400
    assert report.count("(--max-spans N shows more)") == 5
    assert 0 < report.count("execute_tool step_") < 5 * 59
    # Asked for explicitly, --max-spans is obeyed and the report runs longer.
    longer = _analyze(capsys, str(path), "--top", "5", "--max-spans", "60")
    assert len(longer.splitlines()) > 400
    assert longer.count("91 more spans, 91 of them") == 5
    # However many traces are asked for, each tree keeps its first spans.
    report = _analyze(capsys, str(path), "--top", "10")
    assert report.count("146 more spans, 146 of them on the critical path") == 10


def test_the_on_disk_report_is_fitted_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _wide_traces(tmp_path / "wide.json", traces=12, children=150)
    assert _analyze(capsys, str(path), "--on-disk") == _analyze(capsys, str(path))


def _parallelizable(trace_id: str, rests_on: str) -> Finding:
    return Finding(
        kind="parallelizable",
        title=f"two tools in {trace_id}",
        saving_ns=200 * 1_000_000,
        where=[{"name": "execute_tool a"}, {"name": "execute_tool b"}],
        rests_on=rests_on,
    )


def test_across_traces_an_assumed_independence_is_not_stated_and_its_saving_not_added_up() -> None:
    # Three traces: in one the model asked for both tools at once, in two nothing shows that.
    findings = {
        "t1": [_parallelizable("t1", REQUESTED_TOGETHER)],
        "t2": [_parallelizable("t2", ASSUMED_NO_RECORDED_FLOW)],
        "t3": [_parallelizable("t3", ASSUMED_NO_RECORDED_FLOW)],
    }
    groups = aggregate_findings(findings)
    shown, assumed = groups
    assert (shown.rests_on, shown.total_ns, len(shown.savings)) == (MEASURED_TIMES, 200 * 1_000_000, 1)
    assert (assumed.rests_on, assumed.total_ns, len(assumed.savings)) == (ASSUMED_NO_RECORDED_FLOW, 0, 2)
    assert _sentence(shown, 3) == (
        "In 1 of 3 traces, 'execute_tool a' and 'execute_tool b' ran one after another though nothing made "
        "them wait for each other; saving 200 ms."
    )
    assert _sentence(assumed, 3) == (
        "In 2 of 3 traces, 'execute_tool a' and 'execute_tool b' ran one after another with no recorded data "
        "flow between them."
    )


def test_across_traces_a_saving_on_estimated_times_says_so() -> None:
    findings = {"t1": [_parallelizable("t1", ESTIMATED_TIMING)], "t2": [_parallelizable("t2", ESTIMATED_TIMING)]}
    (group,) = aggregate_findings(findings)
    assert group.total_ns == 0
    assert _sentence(group, 2).endswith("(by times the trace's adapter estimated, not measured ones).")


def test_the_operations_table_shows_names_whole_up_to_the_single_traces_width(
    twenty_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _analyze(capsys, str(twenty_traces))
    table = report.split("Top operations across traces by critical-path time\n")[1].split("\n  (median")[0]
    header, *rows = table.splitlines()
    # The column is as wide as the longest name: the embedding model's 22 characters, not cut.
    assert "  text-embedding-3-small embedding" in table
    category_column = header.index("category")
    for row in rows[:-1]:  # the last row counts the operations left out
        assert row[category_column - 1] == " " and row[category_column] != " ", table
    assert "…" not in "".join(row.split()[0] for row in rows[:-1])


def test_a_name_longer_than_the_single_traces_column_is_cut_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_name = "a_tool_with_a_name_far_longer_than_any_column"
    spans = [span for run in generate_runs(TRACES, seed=5) for span in run]
    for span in spans:
        if span["name"].startswith("execute_tool"):
            span["attributes"] = [
                {"key": "gen_ai.tool.name", "value": {"stringValue": long_name}}
                if a["key"] == "gen_ai.tool.name"
                else a
                for a in span["attributes"]
            ]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    report = _analyze(capsys, str(path))
    table = report.split("Top operations across traces by critical-path time\n")[1].split("\n  (median")[0]
    assert f"  {long_name[:23]}… tool" in table, table


def test_trace_totals_survive_pickling_as_workers_send_them() -> None:
    import pickle

    from otel_agent_profiler.adapters.otlp_json import records_from_otlp
    from otel_agent_profiler.core.analyze import profile_records
    from otel_agent_profiler.report.cross_trace import TraceTotals

    spans = [span for run in generate_runs(6, seed=11) for span in run]
    problems: list[str] = []
    profiles = profile_records(records_from_otlp(otlp_document(spans), problems))
    assert not problems
    totals = [TraceTotals.of(profile) for profile in profiles]
    assert any(total.calls.calls for total in totals) and any(total.operations for total in totals)
    copied = pickle.loads(pickle.dumps(totals, protocol=pickle.HIGHEST_PROTOCOL))
    assert copied == totals
    assert all(type(total) is TraceTotals for total in copied)
    # Nested values come back as their own classes, not as the tuples they travelled as.
    first = copied[0]
    assert type(first.tokens) is type(totals[0].tokens)
    assert {type(stats) for stats in first.operations.values()} == {type(s) for s in totals[0].operations.values()}
