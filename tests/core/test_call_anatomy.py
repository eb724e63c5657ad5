"""Call anatomy (core.call_anatomy): an LLM call split into queue, prefill, decode and other by
the inference server's own span (vLLM's ``llm_request``), offline and in the JSON schema."""

from __future__ import annotations

import pytest

from otel_agent_profiler.core import profiles_to_dict, trace_to_dict
from otel_agent_profiler.core.call_anatomy import SERVER_PHASES_EXCEED_CALL
from tests.support.span_builders import CLIENT, SERVER, by_name, profile, span

MS = 1_000_000
CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
USAGE = {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40}


def server_attributes(queue_s: float, prefill_s: float, decode_s: float) -> dict[str, object]:
    """What vLLM's llm_request span carries (seconds), for the given phases."""
    return {
        "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
        "gen_ai.request.id": "cmpl-1",
        "gen_ai.usage.prompt_tokens": 1200,
        "gen_ai.usage.completion_tokens": 40,
        "gen_ai.latency.time_in_queue": queue_s,
        "gen_ai.latency.time_to_first_token": queue_s + prefill_s,
        "gen_ai.latency.e2e": queue_s + prefill_s + decode_s,
        "gen_ai.latency.time_in_model_prefill": prefill_s,
        "gen_ai.latency.time_in_model_decode": decode_s,
        "gen_ai.latency.time_in_model_inference": prefill_s + decode_s,
    }


def agent_with_served_call(queue_s=0.2, prefill_s=0.3, decode_s=0.4, client_usage=True, tool_ms=100):
    """agent [0, 1200] -> chat [0, 1000] -> POST (httpx) [10, 990] -> llm_request [20, 980]; tool after."""
    return [
        span("agent", None, 0, 1200 * MS, attributes={"gen_ai.operation.name": "invoke_agent"}),
        span("chat", "agent", 0, 1000 * MS, CLIENT, attributes={**CHAT, **(USAGE if client_usage else {})}),
        span("post", "chat", 10 * MS, 990 * MS, CLIENT, attributes={"http.request.method": "POST"}),
        span("server", "post", 20 * MS, 980 * MS, SERVER, attributes=server_attributes(queue_s, prefill_s, decode_s)),
        span("tool", "agent", 1000 * MS, (1000 + tool_ms) * MS, attributes={"gen_ai.operation.name": "execute_tool"}),
    ]


def test_phases_add_up_to_the_client_span_and_the_call_is_counted_once():
    trace = profile(agent_with_served_call())
    spans = by_name(trace)
    phases = spans["chat"].llm_phases
    assert phases is not None
    assert (phases.queue_ns, phases.prefill_ns, phases.decode_ns) == (200 * MS, 300 * MS, 400 * MS)
    assert phases.other_ns == 100 * MS
    assert phases.total_ns == spans["chat"].duration_ns
    # The server and transport spans are the same call: LLM time, not counted again.
    assert trace.llm_calls == 1
    assert trace.tokens.input == 1200 and trace.tokens.output == 40
    assert [spans[name].category for name in ("post", "server")] == ["llm", "llm"]
    assert not spans["server"].counted and not spans["post"].counted and spans["chat"].counted
    assert trace.categories["internal"].critical_path_ns == 0
    assert trace.categories["llm"].critical_path_ns == 1000 * MS


def test_json_has_the_phases_on_the_span_and_on_the_trace():
    document = trace_to_dict(profile(agent_with_served_call()))
    chat = next(s for s in document["spans"] if s["name"] == "chat")
    assert chat["llm_phases_ms"] == {"queue": 200.0, "prefill": 300.0, "decode": 400.0, "other": 100.0}
    assert document["critical_path_llm_phases_ms"] == {
        "queue": 200.0,
        "prefill": 300.0,
        "decode": 400.0,
        "other": 100.0,
    }
    server = next(s for s in document["spans"] if s["name"] == "server")
    assert server["llm_phases_ms"] is None


def test_a_client_span_without_usage_takes_the_servers():
    trace = profile(agent_with_served_call(client_usage=False))
    assert trace.llm_calls == 1
    assert trace.tokens.input == 1200 and trace.tokens.output == 40


def test_server_numbers_beyond_the_call_are_scaled_down_to_fit_and_reported():
    trace = profile(agent_with_served_call(queue_s=0.6, prefill_s=0.6, decode_s=0.8))
    phases = by_name(trace)["chat"].llm_phases
    assert phases is not None
    assert phases.other_ns == 0
    assert phases.total_ns == 1000 * MS
    assert (phases.queue_ns, phases.prefill_ns, phases.decode_ns) == (300 * MS, 300 * MS, 400 * MS)
    assert [a.kind for a in trace.anomalies] == [SERVER_PHASES_EXCEED_CALL]
    assert all(value >= 0 for value in phases.to_dict().values())


def test_critical_path_phases_count_only_the_calls_share_of_the_path():
    # Two parallel calls: the shorter one is off the critical path and adds nothing.
    records = [
        span("agent", None, 0, 1000 * MS, attributes={"gen_ai.operation.name": "invoke_agent"}),
        span("long", "agent", 0, 1000 * MS, CLIENT, attributes={**CHAT, **USAGE}),
        span("s1", "long", 0, 1000 * MS, SERVER, attributes=server_attributes(0.5, 0.25, 0.25)),
        span("short", "agent", 0, 500 * MS, CLIENT, attributes={**CHAT, **USAGE}),
        span("s2", "short", 0, 500 * MS, SERVER, attributes=server_attributes(0.0, 0.25, 0.25)),
    ]
    trace = profile(records)
    assert trace.llm_calls == 2
    critical = trace.critical_path_llm_phases
    assert critical is not None
    assert (critical.queue_ns, critical.prefill_ns, critical.decode_ns, critical.other_ns) == (
        500 * MS,
        250 * MS,
        250 * MS,
        0,
    )


def test_without_server_spans_nothing_changes():
    records = agent_with_served_call()
    plain = [record for record in records if record.name not in ("post", "server")]
    trace = profile(plain)
    assert by_name(trace)["chat"].llm_phases is None
    document = profiles_to_dict([trace])["traces"][0]
    assert document["critical_path_llm_phases_ms"] is None
    assert all(s["llm_phases_ms"] is None for s in document["spans"])


@pytest.mark.parametrize(
    ("attributes", "expected_ms"),
    [
        # Only time to first token and end to end (older vLLM): prefill and decode derived.
        (
            {"gen_ai.latency.time_in_queue": 0.1, "gen_ai.latency.time_to_first_token": 0.3, "gen_ai.latency.e2e": 0.8},
            (100.0, 200.0, 500.0),
        ),
        # Nonsense values are ignored rather than turned into negative phases.
        (
            {"gen_ai.latency.time_in_queue": float("nan"), "gen_ai.latency.time_in_model_prefill": -1.0},
            (0.0, 0.0, 0.0),
        ),
    ],
)
def test_phases_from_partial_or_broken_server_attributes(attributes, expected_ms):
    records = [
        span("chat", None, 0, 1000 * MS, CLIENT, attributes={**CHAT, **USAGE}),
        span("server", "chat", 0, 1000 * MS, SERVER, attributes=attributes),
    ]
    phases = by_name(profile(records))["chat"].llm_phases
    assert phases is not None
    assert (phases.queue_ns / MS, phases.prefill_ns / MS, phases.decode_ns / MS) == expected_ms
    assert phases.total_ns == 1000 * MS


def _findings_of(records, kind):
    from otel_agent_profiler.core.findings import find_all

    return [f for f in find_all(profile(records)) if f.kind == kind]


def test_queueing_on_the_critical_path_is_a_finding_with_a_projected_saving():
    from otel_agent_profiler.core.findings import LLM_QUEUE

    (finding,) = _findings_of(agent_with_served_call(queue_s=0.5, prefill_s=0.2, decode_s=0.2), LLM_QUEUE)
    assert "waited 500 ms in the inference server's queue" in finding.title
    assert "saturated" in finding.title
    assert finding.suggestion is not None and "replicas" in finding.suggestion and "priority" in finding.suggestion
    # Removing the wait shortens the server's span, the call and the trace after it by as much.
    assert finding.saving_ns == 500 * MS
    assert [location["name"] for location in finding.where] == ["chat"]


@pytest.mark.parametrize(
    ("phases", "kind", "words"),
    [
        ((0.0, 0.7, 0.2), "llm_prefill", ("prefilling prompts", "prefix caching")),
        ((0.0, 0.1, 0.8), "llm_decode", ("decoding answers", "max_tokens")),
    ],
)
def test_prefill_or_decode_dominating_is_a_finding(phases, kind, words):
    (finding,) = _findings_of(agent_with_served_call(*phases), kind)
    assert words[0] in finding.title
    assert finding.suggestion is not None and words[1] in finding.suggestion
    assert finding.saving_ns == 0
    assert finding.evidence["saving_if_2x_faster_ns"] > 0


def test_no_phase_findings_below_the_thresholds_or_without_server_spans():
    from otel_agent_profiler.core.findings import LLM_DECODE, LLM_PREFILL, LLM_QUEUE

    balanced = agent_with_served_call(queue_s=0.05, prefill_s=0.4, decode_s=0.4)
    plain = [record for record in agent_with_served_call() if record.name not in ("post", "server")]
    for records in (balanced, plain):
        for kind in (LLM_QUEUE, LLM_PREFILL, LLM_DECODE):
            assert _findings_of(records, kind) == []


def test_offline_cli_json_carries_the_phases(tmp_path, capsys):
    import json

    from otel_agent_profiler.adapters.otlp_json_out import otlp_json_document
    from otel_agent_profiler.cli import main

    path = tmp_path / "served.json"
    path.write_text(json.dumps(otlp_json_document(agent_with_served_call())))
    assert main(["analyze", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (trace,) = document["traces"]
    assert trace["critical_path_llm_phases_ms"] == {"queue": 200.0, "prefill": 300.0, "decode": 400.0, "other": 100.0}
    assert trace["llm_calls"] == 1


def test_text_report_splits_the_llm_share_of_the_critical_path():
    from otel_agent_profiler.report.text import render_trace

    report = render_trace(profile(agent_with_served_call()))
    section = report.split("Inside the LLM calls on the critical path", 1)[1].split("\n\n", 1)[0]
    assert "(1.00 s of the 1.00 s in llm" in section
    lines = {line.split()[0]: line.split()[1:3] for line in section.splitlines()[1:]}
    assert lines == {"queue": ["200", "ms"], "prefill": ["300", "ms"], "decode": ["400", "ms"], "other": ["100", "ms"]}
    plain = [record for record in agent_with_served_call() if record.name not in ("post", "server")]
    assert "Inside the LLM calls" not in render_trace(profile(plain))


def test_html_report_carries_the_phases_of_each_split_call():
    import json
    import re

    from otel_agent_profiler.report.html import render_html

    trace = profile(agent_with_served_call())
    page = render_html([trace], {})
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)[1])
    fields = data["span_fields"]
    view = data["traces"][trace.trace_id]
    phases = {row[fields.index("name")]: row[fields.index("llm_phases")] for row in view["spans"]}
    assert phases["chat"] == [200.0, 300.0, 400.0, 100.0]
    assert phases["server"] is None and phases["agent"] is None
    assert view["llm_phases"] == [200.0, 300.0, 400.0, 100.0]
    assert "LLM call phases" in page
    plain = [record for record in agent_with_served_call() if record.name not in ("post", "server")]
    assert "LLM call phases" not in render_html([profile(plain)], {})


def test_a_streamed_response_outliving_its_http_span_is_not_an_anomaly():
    records = agent_with_served_call()
    # The HTTP client's span ends with the response headers; the server streams on until 980 ms.
    streamed = [
        span("post", "chat", 10 * MS, 300 * MS, CLIENT, attributes={"http.request.method": "POST"})
        if record.name == "post"
        else record
        for record in records
    ]
    trace = profile(streamed)
    assert [a.kind for a in trace.anomalies] == []
    assert by_name(trace)["chat"].llm_phases.total_ns == 1000 * MS
    # The same shape without the server's attributes is still reported.
    unserved = [
        span("server", "post", 20 * MS, 980 * MS, SERVER) if record.name == "server" else record for record in streamed
    ]
    assert [a.kind for a in profile(unserved).anomalies] == ["child_outlives_parent"]


@pytest.mark.parametrize(
    ("model", "ending"),
    [
        ("gpt-4o", " Or try gpt-4o-mini for these calls, at a lower price per token."),
        # Nothing smaller than gpt-4o-mini is priced, and a self-hosted model has no price: no model advice.
        ("gpt-4o-mini", "ask for shorter answers."),
        ("meta-llama/Llama-3.1-8B-Instruct", "ask for shorter answers."),
    ],
)
def test_the_decode_finding_names_a_smaller_model_only_where_one_is_priced(model, ending):
    import dataclasses

    from otel_agent_profiler.core.findings import LLM_DECODE

    records = [
        dataclasses.replace(r, attributes={**r.attributes, "gen_ai.request.model": model}) if r.name == "chat" else r
        for r in agent_with_served_call(queue_s=0.0, prefill_s=0.1, decode_s=0.8)
    ]
    (finding,) = _findings_of(records, LLM_DECODE)
    assert finding.suggestion is not None and finding.suggestion.endswith(ending)
    assert "smaller, faster model" not in finding.suggestion
