"""ATIF trajectories become span records laid out from their step timestamps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import otel_agent_profiler
from otel_agent_profiler.adapters import ATIF, ATIF_JSON_LINES, parse_trace_bytes
from otel_agent_profiler.cli import main
from otel_agent_profiler.core import profile_records
from otel_agent_profiler.core.findings import PARALLELIZABLE, combined_projection, find_all
from tests.support.paths import ROOT

MS = 1_000_000
T0 = "2026-11-20T10:00:00"


def _at(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return f"2026-11-20T10:00:{seconds:02d}.{millis:03d}Z"


TRAJECTORY = {
    "schema_version": "ATIF-v1.4",
    "session_id": "run-42",
    "agent": {"name": "swe-agent", "version": "1.2", "model_name": "gpt-4o"},
    "steps": [
        {"step_id": 1, "timestamp": _at(0), "source": "user", "message": "Fix the failing test"},
        {
            "step_id": 2,
            "timestamp": _at(2000),
            "source": "agent",
            "message": "I will look at the test and the module.",
            "tool_calls": [
                {"tool_call_id": "call_a", "function_name": "read_file", "arguments": {"path": "test_x.py"}},
                {"tool_call_id": "call_b", "function_name": "read_file", "arguments": {"path": "x.py"}},
            ],
            "observation": {"results": [{"source_call_id": "call_a", "content": "..."}, {"source_call_id": "call_b"}]},
            "metrics": {"prompt_tokens": 1200, "completion_tokens": 80, "cached_tokens": 1024, "cost_usd": 0.01},
        },
        {
            "step_id": 3,
            "timestamp": _at(3000),
            "source": "agent",
            "model_name": "gpt-4o-mini",
            "message": "Done.",
            "metrics": {"prompt_tokens": 2000, "completion_tokens": 20},
        },
    ],
    "final_metrics": {"total_prompt_tokens": 3200, "total_completion_tokens": 100},
}


def _records(document: object) -> tuple[list, list[str], str | None]:  # type: ignore[type-arg]
    trace_file = parse_trace_bytes(json.dumps(document).encode(), "run.json")
    return trace_file.records, trace_file.problems, trace_file.format


def test_trajectory_becomes_an_agent_span_with_llm_and_tool_spans() -> None:
    records, problems, file_format = _records(TRAJECTORY)
    assert problems == [] and file_format == ATIF
    by_name: dict[str, list] = {}  # type: ignore[type-arg]
    for record in records:
        by_name.setdefault(record.name, []).append(record)
    (root,) = by_name["invoke_agent swe-agent"]
    assert root.parent_span_id is None and root.end_ns - root.start_ns == 3000 * MS
    (first_llm,) = by_name["chat gpt-4o"]
    (second_llm,) = by_name["chat gpt-4o-mini"]
    # Step 2 took the 2 s since step 1: its LLM call, then its two tool calls, a third each.
    assert (first_llm.start_ns - root.start_ns, first_llm.end_ns - root.start_ns) == (0, 666_666_666)
    assert (second_llm.start_ns - root.start_ns, second_llm.end_ns - root.start_ns) == (2000 * MS, 3000 * MS)
    assert first_llm.attributes["gen_ai.usage.input_tokens"] == 1200
    assert first_llm.attributes["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert "call_a" in first_llm.attributes["gen_ai.output.messages"]
    tools = sorted(by_name["execute_tool read_file"], key=lambda r: r.start_ns)
    assert [(t.start_ns - root.start_ns, t.end_ns - root.start_ns) for t in tools] == [
        (666_666_666, 1_333_333_332),
        (1_333_333_332, 2000 * MS),
    ]
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call_a", "call_b"]
    assert json.loads(tools[0].attributes["gen_ai.tool.call.arguments"]) == {"path": "test_x.py"}
    assert all(r.attributes.get("agent_profiler.timing") == "estimated" for r in records if r is not root)
    assert {r.trace_id for r in records} == {root.trace_id} and len(root.trace_id) == 32


def test_trajectory_is_profiled_like_any_trace() -> None:
    records, _, _ = _records(TRAJECTORY)
    (profile,) = profile_records(records)
    assert profile.llm_calls == 2
    assert profile.tokens.input == 3200 and profile.tokens.cached_input == 1024
    assert profile.categories["tool"].count == 2
    # Nothing overlaps, so every part of the run is on the critical path.
    assert profile.categories["llm"].critical_path_ns == 666_666_666 + 1000 * MS
    assert profile.categories["tool"].critical_path_ns == 2000 * MS - 666_666_666
    assert profile.critical_path_ns == 3000 * MS


def test_findings_on_laid_out_times_say_they_are_estimates_and_stay_out_of_the_combined_saving() -> None:
    records, _, _ = _records(TRAJECTORY)
    (profile,) = otel_agent_profiler.profile_records(records)  # reads what the adapter marked
    findings = find_all(profile)
    timed = [f for f in findings if f.saving_ns > 0]
    assert timed and all(f.rests_on == "estimated timing" for f in timed)
    assert all("These times are estimates, not measurements" in f.title for f in timed)
    # The two reads ran one after another only because the adapter laid them out so.
    (parallel,) = [f for f in findings if f.kind == PARALLELIZABLE]
    assert parallel.saving_ns == 666_666_666  # the shorter of the two reads
    assert combined_projection(profile, findings).changes == 0
    # Token findings do not rest on the times.
    assert all(f.rests_on == "measured" for f in findings if f.saving_ns == 0)


def test_the_same_session_gives_the_same_ids() -> None:
    first, _, _ = _records(TRAJECTORY)
    second, _, _ = _records(TRAJECTORY)
    assert [(r.trace_id, r.span_id) for r in first] == [(r.trace_id, r.span_id) for r in second]


def test_steps_without_a_timestamp_are_reported_and_the_rest_kept() -> None:
    broken = json.loads(json.dumps(TRAJECTORY))
    broken["steps"][2]["timestamp"] = "yesterday"
    records, problems, _ = _records(broken)
    assert problems == ["steps[2]: missing or unreadable timestamp 'yesterday'"]
    assert {r.name for r in records} == {"invoke_agent swe-agent", "chat gpt-4o", "execute_tool read_file"}


def test_analyze_reads_an_atif_file(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(TRAJECTORY))
    out = tmp_path / "profile.json"
    assert main(["analyze", str(path), "--format", "json", "--output", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["files"][0]["format"] == "atif"
    assert document["traces"][0]["span_count"] == 5


def _other_run() -> dict:  # type: ignore[type-arg]
    """A second trajectory of the same session: a re-run, one trace of its own."""
    other = json.loads(json.dumps(TRAJECTORY))
    other["steps"] = other["steps"][:2]
    return other  # type: ignore[no-any-return]


def _traces(records: list) -> dict[str, set[str]]:  # type: ignore[type-arg]
    """Span names per trace id."""
    traces: dict[str, set[str]] = {}
    for record in records:
        traces.setdefault(record.trace_id, set()).add(record.name)
    return traces


def test_a_list_of_trajectories_is_one_trace_each() -> None:
    records, problems, file_format = _records([TRAJECTORY, _other_run()])
    assert problems == [] and file_format == ATIF
    assert sorted(map(len, _traces(records).values())) == [3, 4]
    assert len([r for r in records if r.parent_span_id is None]) == 2


def test_an_item_of_a_list_that_is_no_trajectory_is_reported_and_the_rest_kept() -> None:
    broken = _other_run()
    broken["steps"][1]["timestamp"] = "never"
    records, problems, file_format = _records([TRAJECTORY, {"steps": 3}, broken])
    assert file_format == ATIF
    assert problems == ["[1]: not an ATIF trajectory", "[2]: steps[1]: missing or unreadable timestamp 'never'"]
    assert sorted(map(len, _traces(records).values())) == [1, 4]


def test_json_lines_of_trajectories_are_one_trace_each_and_a_bad_line_is_named() -> None:
    lines = [json.dumps(TRAJECTORY), '{"schema_version": "ATIF-v1.4", "steps": [', json.dumps(_other_run())]
    trace_file = parse_trace_bytes("\n".join(lines).encode() + b"\n", "runs.jsonl")
    assert trace_file.format == ATIF_JSON_LINES
    (problem,) = trace_file.problems
    assert problem == "line 2: truncated: the JSON ends unexpectedly"
    assert sorted(map(len, _traces(trace_file.records).values())) == [3, 4]
    # The same lines read again give the same ids.
    again = parse_trace_bytes("\n".join(lines).encode(), "runs.jsonl")
    assert [r.span_id for r in again.records] == [r.span_id for r in trace_file.records]


def test_analyze_reads_atif_json_lines_and_names_the_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([json.dumps(TRAJECTORY), "not json", json.dumps(_other_run())]) + "\n")
    out = tmp_path / "profile.json"
    assert main(["analyze", str(path), "--format", "json", "--output", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs.jsonl: read 9 spans but skipped unreadable data: line 2: malformed JSON" in err[0]
    document = json.loads(out.read_text())
    assert document["files"][0]["format"] == "atif-jsonl"
    assert sorted(trace["span_count"] for trace in document["traces"]) == [4, 5]


def test_estimated_times_are_marked_in_the_json_and_said_in_the_text_and_html_reports(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(TRAJECTORY))
    out = tmp_path / "profile.json"
    assert main(["analyze", str(path), "--format", "json", "--output", str(out)]) == 0
    (trace,) = json.loads(out.read_text())["traces"]
    estimated = [span for span in trace["spans"] if span["timing_estimated"]]
    assert estimated and trace["timing_estimated_spans"] == len(estimated)
    text = tmp_path / "profile.txt"
    assert main(["analyze", str(path), "--output", str(text)]) == 0
    sentence = " ".join(line.strip() for line in text.read_text().splitlines())
    which = "all" if len(estimated) == trace["span_count"] else f"{len(estimated)} of {trace['span_count']}"
    assert f"Times of {which} spans are estimates" in sentence
    page = tmp_path / "report.html"
    assert main(["report", str(path), "--html", str(page)]) == 0
    assert f"Times of {which} spans are estimates" in page.read_text()


def test_measured_traces_carry_no_estimate_note(tmp_path: Path) -> None:
    out = tmp_path / "profile.txt"
    assert main(["analyze", str(ROOT / "examples" / "traces" / "research-agent.otlp.json"), "--output", str(out)]) == 0
    assert "are estimates" not in out.read_text()
