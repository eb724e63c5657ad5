"""Children that outlive their parent, or start after it ended: anomalies that say where the time went."""

from __future__ import annotations

import json

from otel_agent_profiler.core.findings import BOTTLENECK, find_all, find_bottlenecks
from otel_agent_profiler.core.overrunning_children import CHILD_OUTLIVES_PARENT, CHILD_STARTS_AFTER_PARENT
from otel_agent_profiler.core.schema import trace_to_dict
from otel_agent_profiler.report.html import render_html
from otel_agent_profiler.report.text import render_trace
from tests.support.span_builders import CONSUMER, PRODUCER, by_name, profile, sid, span

MS = 1_000_000


def _three_instrumentations_on_one_client() -> list[object]:
    """An agent whose streamed call two OpenAI instrumentations describe, as they really do.

    OTel openai-v2 ends its ``chat`` span when ``create()`` returns the stream (54 ms); the
    OpenInference span it wraps ends with the last chunk (712 ms later). A final call follows.
    """
    return [
        span(
            "agent", None, 0, 800 * MS, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        ),
        span(
            "chat gpt-4o-mini",
            "agent",
            10 * MS,
            64 * MS,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
        ),
        span(
            "ChatCompletion",
            "chat gpt-4o-mini",
            12 * MS,
            724 * MS,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini-2024-07-18",
                "llm.token_count.prompt": 1200,
                "llm.token_count.completion": 300,
            },
        ),
        span(
            "final",
            "agent",
            730 * MS,
            790 * MS,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1500,
                "gen_ai.usage.output_tokens": 40,
            },
        ),
    ]


def test_a_streamed_child_outliving_its_parent_is_an_anomaly_naming_where_its_time_went() -> None:
    trace = profile(_three_instrumentations_on_one_client())
    (anomaly,) = trace.anomalies
    assert anomaly.kind == CHILD_OUTLIVES_PARENT
    assert anomaly.span_id == sid("ChatCompletion")
    assert anomaly.parent_span_id == sid("chat gpt-4o-mini")
    assert anomaly.overrun_ns == 660 * MS
    assert anomaly.outside_ns == 660 * MS
    # The agent took the LLM's time after its parent ended as its own.
    assert anomaly.self_time_of == ((sid("agent"), 660 * MS),)
    assert anomaly.after_roots_ns == 0
    assert "'agent'" in anomaly.detail and "660.000 ms" in anomaly.detail


def test_jaeger_numbers_stay_the_default() -> None:
    spans = by_name(profile(_three_instrumentations_on_one_client()))
    # Jaeger's rule: the child is clipped to its parent, its overrun becomes the agent's own time.
    assert spans["agent"].self_time_ns == 800 * MS - 54 * MS - 60 * MS
    assert spans["ChatCompletion"].critical_path_ns == 52 * MS
    assert spans["chat gpt-4o-mini"].critical_path_ns == 2 * MS


def test_the_anomaly_in_json_names_child_parent_overrun_and_where_the_time_went() -> None:
    document = json.loads(json.dumps(trace_to_dict(profile(_three_instrumentations_on_one_client()))))
    (anomaly,) = document["anomalies"]
    assert anomaly == {
        "kind": "child_outlives_parent",
        "span_id": sid("ChatCompletion"),
        "detail": anomaly["detail"],
        "parent_span_id": sid("chat gpt-4o-mini"),
        "overrun_ms": 660.0,
        "outside_parent_ms": 660.0,
        "self_time_of": [{"span_id": sid("agent"), "ms": 660.0}],
        "overlapped_ms": 0.0,
        "after_roots_ms": 0.0,
    }


def test_the_bottleneck_verdict_it_makes_unreliable_says_so() -> None:
    trace = profile(_three_instrumentations_on_one_client())
    agent_verdicts = [f for f in find_bottlenecks(trace) if f.category == "agent"]
    assert agent_verdicts
    for finding in agent_verdicts:
        assert finding.caveat is not None
        assert sid("ChatCompletion") in finding.caveat and "'chat gpt-4o-mini'" in finding.caveat
        assert finding.to_dict()["caveat"] == finding.caveat
    # The final call took nothing from the overrun: its verdict stands.
    final = [f for f in find_bottlenecks(trace) if f.span_ids == (sid("final"),)]
    assert final and final[0].caveat is None and "caveat" not in final[0].to_dict()


def test_text_and_html_reports_show_the_anomaly_and_the_caveat() -> None:
    trace = profile(_three_instrumentations_on_one_client())
    findings = find_all(trace)
    assert any(f.kind == BOTTLENECK and f.caveat for f in findings)
    text = render_trace(trace, findings=findings)
    assert f"! child_outlives_parent {sid('ChatCompletion')}" in text
    assert "Unreliable: span 'ChatCompletion'" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    page = render_html([trace], {trace.trace_id: findings})
    assert "child_outlives_parent" in page and "Unreliable: span 'ChatCompletion'" in page


def test_a_child_starting_after_its_parent_ended() -> None:
    trace = profile(
        [
            span("root", None, 0, 100 * MS),
            span("handler", "root", 0, 10 * MS),
            span("callback", "handler", 30 * MS, 50 * MS),
        ]
    )
    (anomaly,) = trace.anomalies
    assert (anomaly.kind, anomaly.span_id, anomaly.parent_span_id) == (
        CHILD_STARTS_AFTER_PARENT,
        sid("callback"),
        sid("handler"),
    )
    assert anomaly.overrun_ns == 40 * MS
    assert anomaly.outside_ns == 20 * MS
    assert anomaly.self_time_of == ((sid("root"), 20 * MS),)


def test_time_covered_by_siblings_and_after_the_root_is_accounted_for() -> None:
    trace = profile(
        [
            span("root", None, 0, 100 * MS),
            span("parent", "root", 0, 40 * MS),
            span("child", "parent", 10 * MS, 130 * MS),
            span("sibling", "root", 50 * MS, 70 * MS),
        ]
    )
    (anomaly,) = trace.anomalies
    assert anomaly.overrun_ns == 90 * MS
    assert anomaly.self_time_of == ((sid("root"), 40 * MS),)  # 40-50 and 70-100
    assert anomaly.overlapped_ns == 20 * MS  # the sibling's 50-70
    assert anomaly.after_roots_ns == 30 * MS  # 100-130, after the root ended


def test_what_is_not_an_overrun() -> None:
    trace = profile(
        [
            span("root", None, 0, 100 * MS),
            # Within the tolerance: scopes closing in the other order, clock granularity.
            span("a", "root", 0, 50 * MS),
            span("a1", "a", 10 * MS, 50 * MS + MS // 2),
            # Messaging is asynchronous: a consumer may run after its producer ended.
            span("send", "root", 60 * MS, 61 * MS, PRODUCER),
            span("receive", "send", 70 * MS, 90 * MS, CONSUMER),
            # Never ended: already an anomaly of its own.
            span("open", "root", 95 * MS, None),
        ]
    )
    assert {a.kind for a in trace.anomalies} == {"unended_span"}
