"""LLM calls split from their agent's trace (LangChain + OpenInference with Traceloop's OpenAI
instrumentation under zero-code): found, reported, and counted once across traces.

The input is OTLP JSON shaped as those instrumentations write it: OpenInference's LangChain
spans (CHAIN / LLM / TOOL, ``llm.model_name`` the answering snapshot, ``llm.token_count.*``) in
one trace, and each OpenAI client call again as a one-span ``openai.chat`` trace (GenAI
attributes, request and response model) because the two did not share context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.analytics import span_table, trace_table
from otel_agent_profiler.cli import main
from otel_agent_profiler.core.split_traces import cross_trace_totals, find_split_llm_calls
from otel_agent_profiler.offline import load_profiles

MS = 1_000_000
T0 = 1_763_000_000_000_000_000
AGENT_TRACE = "a" * 32
PROCESS = {"service.name": "langgraph-app", "service.instance.id": "0b6f3e7c-1", "process.pid": 4242}


def _value(value: object) -> dict[str, object]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": str(value)}


def _attributes(attributes: dict[str, object]) -> list[dict[str, object]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _span(
    trace_id: str, span_id: str, parent: str | None, name: str, start_ms: float, end_ms: float, **kw: Any
) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        **({"parentSpanId": parent} if parent else {}),
        "name": name,
        "kind": kw.pop("kind", 1),
        "startTimeUnixNano": str(T0 + round(start_ms * MS)),
        "endTimeUnixNano": str(T0 + round(end_ms * MS)),
        "attributes": _attributes(kw.pop("attributes")),
    }


def _oi_llm(span_id: str, parent: str, start: float, end: float, tokens: tuple[int, int]) -> dict:
    return _span(
        AGENT_TRACE,
        span_id,
        parent,
        "ChatOpenAI",
        start,
        end,
        attributes={
            "openinference.span.kind": "LLM",
            "llm.system": "openai",
            "llm.provider": "openai",
            "llm.model_name": "gpt-4o-mini-2024-07-18",
            "llm.token_count.prompt": tokens[0],
            "llm.token_count.completion": tokens[1],
            "llm.token_count.total": sum(tokens),
        },
    )


def _openai_chat(trace_id: str, start: float, end: float, tokens: tuple[int, int], stream: bool = False) -> dict:
    return _span(
        trace_id,
        trace_id[:16],
        None,
        "openai.chat",
        start,
        end,
        kind=3,  # CLIENT
        attributes={
            "llm.request.type": "chat",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "gen_ai.usage.total_tokens": sum(tokens),
            "gen_ai.is_streaming": stream,
        },
    )


def _resource_spans(resource: dict[str, object], scope: str, spans: list[dict]) -> dict:
    return {
        "resource": {"attributes": _attributes({**resource, "telemetry.sdk.language": "python"})},
        "scopeSpans": [{"scope": {"name": scope}, "spans": spans}],
    }


def langchain_zero_code_document(*, other_process_copy: bool = False) -> dict:
    """One LangGraph run with two tools in parallel and a streamed final call, as zero-code exports it."""
    agent = [
        _span(AGENT_TRACE, "1" * 16, None, "LangGraph", 0, 2000, attributes={"openinference.span.kind": "CHAIN"}),
        _span(AGENT_TRACE, "2" * 16, "1" * 16, "agent", 50, 850, attributes={"openinference.span.kind": "CHAIN"}),
        _oi_llm("3" * 16, "2" * 16, 100, 800, (120, 30)),
        _span(AGENT_TRACE, "4" * 16, "1" * 16, "tools", 810, 1100, attributes={"openinference.span.kind": "CHAIN"}),
        _span(
            AGENT_TRACE,
            "5" * 16,
            "4" * 16,
            "get_weather",
            812,
            1095,
            attributes={"openinference.span.kind": "TOOL", "tool.name": "get_weather"},
        ),
        _span(
            AGENT_TRACE,
            "6" * 16,
            "4" * 16,
            "get_time",
            812,
            900,
            attributes={"openinference.span.kind": "TOOL", "tool.name": "get_time"},
        ),
        _oi_llm("7" * 16, "1" * 16, 1110, 1900, (300, 60)),
    ]
    copies = [_openai_chat("b" * 32, 104, 796, (120, 30)), _openai_chat("c" * 32, 1113, 1890, (300, 60), stream=True)]
    # A call of its own, which no agent made: counted as it is.
    alone = [_openai_chat("d" * 32, 2500, 2900, (500, 80))]
    resource_spans = [
        _resource_spans(PROCESS, "openinference.instrumentation.langchain", agent),
        _resource_spans(PROCESS, "opentelemetry.instrumentation.openai.v1", copies + alone),
    ]
    if other_process_copy:
        # The same call shape at the same time in another worker: not a copy of this agent's call.
        other = {**PROCESS, "service.instance.id": "0b6f3e7c-2", "process.pid": 4243}
        resource_spans.append(
            _resource_spans(
                other, "opentelemetry.instrumentation.openai.v1", [_openai_chat("e" * 32, 104, 796, (120, 30))]
            )
        )
    return {"resourceSpans": resource_spans}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "langchain.json"
    path.write_text(json.dumps(langchain_zero_code_document()), encoding="utf-8")
    return path


def test_split_copies_are_matched_to_their_agent_calls(source: Path) -> None:
    profiles = load_profiles([source]).profiles
    splits = find_split_llm_calls(profiles)
    assert [(s.trace_id, s.agent_trace_id, s.agent_span_id) for s in splits] == [
        ("b" * 32, AGENT_TRACE, "3" * 16),
        ("c" * 32, AGENT_TRACE, "7" * 16),
    ]
    assert all(s.model == "gpt-4o-mini" for s in splits)
    totals = cross_trace_totals(profiles, splits)
    # Summed per trace the agent's two calls count twice; across traces, once (plus the lone call).
    assert sum(p.tokens.total for p in profiles) == 2 * (150 + 360) + 580
    assert totals.tokens.total == 150 + 360 + 580
    assert totals.llm_calls == 3
    assert totals.split_llm_calls == 2 and totals.split_tokens.total == 510


def test_a_copy_from_another_process_is_not_matched(tmp_path: Path) -> None:
    path = tmp_path / "two-workers.json"
    path.write_text(json.dumps(langchain_zero_code_document(other_process_copy=True)), encoding="utf-8")
    splits = find_split_llm_calls(load_profiles([path]).profiles)
    assert "e" * 32 not in {s.trace_id for s in splits}
    assert len(splits) == 2


def test_a_copy_outside_the_agent_calls_time_or_of_other_tokens_is_not_matched(tmp_path: Path) -> None:
    document = langchain_zero_code_document()
    copies = document["resourceSpans"][1]["scopeSpans"][0]["spans"]
    copies[0]["startTimeUnixNano"] = str(T0 + 5000 * MS)  # after the agent's call ended
    copies[0]["endTimeUnixNano"] = str(T0 + 5600 * MS)
    copies[1]["attributes"] = _attributes(
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 301,
            "gen_ai.usage.output_tokens": 60,
        }
    )
    path = tmp_path / "unrelated.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert find_split_llm_calls(load_profiles([path]).profiles) == []


def test_analyze_json_reports_them_and_counts_tokens_once(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--format", "json", str(source)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [s["trace_id"] for s in document["split_llm_calls"]] == ["b" * 32, "c" * 32]
    assert document["split_llm_calls"][0]["tokens"]["total"] == 150
    assert document["totals"]["tokens"]["total"] == 1090
    assert document["totals"]["llm_calls"] == 3
    # Each trace keeps its own numbers: the copy is a trace of its own.
    by_id = {t["trace_id"]: t for t in document["traces"]}
    assert by_id["b" * 32]["tokens"]["total"] == 150


def test_text_report_says_so_and_counts_tokens_once(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(source)]) == 0
    report = capsys.readouterr().out
    # Four traces: the cross-trace summary opens the report.
    assert report.splitlines()[0].startswith("4 traces")
    assert "3 LLM calls" in report.splitlines()[0] and "1,090 tokens" in report.splitlines()[0]
    assert "2 LLM-only traces repeat 2 LLM calls of agent traces" in report


def test_summary_json_totals_count_tokens_and_cost_once(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary_path = tmp_path / "summary.json"
    args = ["report", str(source), "--html", str(tmp_path / "r.html"), "--summary-json", str(summary_path)]
    assert main([*args, "--no-progress"]) == 0
    summary = json.loads(summary_path.read_text())
    assert summary["totals"]["tokens"]["total"] == 1090
    # gpt-4o-mini at the built-in $0.15 / $0.60 per million tokens.
    expected_cost = (120 + 300 + 500) * 0.15e-6 + (30 + 60 + 80) * 0.60e-6
    assert summary["totals"]["cost_usd"] == pytest.approx(expected_cost)
    assert {s["agent_span_id"] for s in summary["split_llm_calls"]} == {"3" * 16, "7" * 16}


def test_analytics_count_the_split_call_in_its_agent_trace_only(source: Path) -> None:
    profiles = load_profiles([source]).profiles
    table = span_table(profiles)
    counted = table[table["counted"] & (table["category"] == "llm")]
    assert int(counted["total_tokens"].sum()) == 1090
    traces = trace_table(table).set_index("trace_id")
    assert traces.loc["b" * 32, "total_tokens"] == 0
    assert traces.loc[AGENT_TRACE, "total_tokens"] == 510
