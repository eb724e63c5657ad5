"""Inside an LLM call: queue, prefill, decode and other, from the inference server's own span.

vLLM (``--otlp-traces-endpoint``) and SGLang export a SERVER span per request (``llm_request``
in vLLM) that continues the client's trace when the request carries ``traceparent``. It
records, in seconds, how long the request waited for a slot (``gen_ai.latency.time_in_queue``),
prefilled its prompt and decoded its answer. When such a span lies below a client LLM span,
the client's call is split into four phases that add up to its duration exactly:

* ``queue``, ``prefill``, ``decode``: the server's numbers;
* ``other``: the rest of the client's duration (network, client and server overhead).

The server's spans (and any HTTP client span between them and the client's LLM span) are the
same call: they take the LLM category and the client's model, and are not counted again in
LLM calls, tokens and cost. A client span without a token count takes the server's. A server
span running past the HTTP span above it, within the client's call, is what a streamed response
looks like (the HTTP client's span ends with the headers): no ``child_outlives_parent`` anomaly.

When the server's three phases add up to more than the client's duration (the two measure
with different clocks, or a retried request's attempts overlapped), they are scaled down in
proportion so they fill it, ``other`` is 0, and a ``server_phases_exceed_call`` anomaly says
by how much. Without server spans nothing here changes a profile.
"""

from __future__ import annotations

from collections.abc import Mapping

from .categories import LLM
from .genai import token_usage_of
from .profile import Anomaly, LlmPhases, SpanProfile, TraceProfile
from .records import AttributeValue, SpanKind, SpanRecord, seconds_as_ns

QUEUE_SECONDS = "gen_ai.latency.time_in_queue"
TIME_TO_FIRST_TOKEN_SECONDS = "gen_ai.latency.time_to_first_token"
E2E_SECONDS = "gen_ai.latency.e2e"
PREFILL_SECONDS = "gen_ai.latency.time_in_model_prefill"
DECODE_SECONDS = "gen_ai.latency.time_in_model_decode"
INFERENCE_SECONDS = "gen_ai.latency.time_in_model_inference"

#: Any of these marks a span as an inference server's record of one request.
SERVER_LATENCY_ATTRIBUTES = (
    QUEUE_SECONDS,
    PREFILL_SECONDS,
    DECODE_SECONDS,
    INFERENCE_SECONDS,
    TIME_TO_FIRST_TOKEN_SECONDS,
    E2E_SECONDS,
)

#: The phases, in the order a call goes through them.
PHASES = ("queue", "prefill", "decode", "other")

SERVER_PHASES_EXCEED_CALL = "server_phases_exceed_call"


def is_server_span(record: SpanRecord) -> bool:
    """Whether a span is an inference server's record of a request: a SERVER span with ``gen_ai.latency.*``.

    (A store that drops span kinds, such as Phoenix, loses this.)
    """
    if record.kind is not SpanKind.SERVER:
        return False
    attributes = record.attributes
    return any(key in attributes for key in SERVER_LATENCY_ATTRIBUTES)


def server_phases_ns(attributes: Mapping[str, AttributeValue]) -> tuple[int, int, int]:
    """Queue, prefill and decode of one server span, in nanoseconds (0 for what it does not say).

    Prefill falls back to time to first token minus queue, or inference minus decode; decode
    to end-to-end minus time to first token, or inference minus prefill.
    """
    queue = seconds_as_ns(attributes.get(QUEUE_SECONDS))
    prefill = seconds_as_ns(attributes.get(PREFILL_SECONDS))
    decode = seconds_as_ns(attributes.get(DECODE_SECONDS))
    ttft = seconds_as_ns(attributes.get(TIME_TO_FIRST_TOKEN_SECONDS))
    e2e = seconds_as_ns(attributes.get(E2E_SECONDS))
    inference = seconds_as_ns(attributes.get(INFERENCE_SECONDS))
    if prefill is None:
        if ttft is not None:
            prefill = max(0, ttft - (queue or 0))
        elif inference is not None and decode is not None:
            prefill = max(0, inference - decode)
    if decode is None:
        if e2e is not None and ttft is not None:
            decode = max(0, e2e - ttft)
        elif inference is not None and prefill is not None:
            decode = max(0, inference - prefill)
    return queue or 0, prefill or 0, decode or 0


def _client_of(span: SpanProfile) -> tuple[SpanProfile, list[SpanProfile]] | None:
    """The nearest LLM span above ``span`` and the spans in between, or None."""
    between: list[SpanProfile] = []
    parent = span.parent
    while parent is not None:
        if parent.category == LLM and not is_server_span(parent.record):
            # A copy of the call, or its HTTP request (``core.call_parts``), stands for the call.
            return parent.same_call_as or parent, between
        between.append(parent)
        parent = parent.parent
    return None


def assign_call_anatomy(profile: TraceProfile) -> None:
    """Split every LLM call with a server span below it into phases (``SpanProfile.llm_phases``).

    Run after the tree, categories, counting of nested duplicates and critical path are known,
    and before the totals (``aggregate``): it changes the categories and counting of the
    server's spans.
    """
    servers: dict[int, tuple[SpanProfile, list[SpanProfile]]] = {}
    for span in profile.spans:
        if not is_server_span(span.record):
            continue
        found = _client_of(span)
        if found is None:
            continue
        client, between = found
        entry = servers.setdefault(id(client), (client, []))
        entry[1].append(span)
        for same_call in (*between, span):
            if same_call.category == LLM and same_call.counted:
                # The call is counted once, on the client's side of it.
                client.counted = True
            same_call.counted = False
            same_call.same_call_as = client
            same_call.category = LLM
            same_call.operation = client.operation
            same_call.model = client.model
            same_call.model_snapshot = client.model_snapshot
        if client.tokens is None:
            client.tokens = token_usage_of(span.record.attributes)
    for client, server_spans in servers.values():
        queue = prefill = decode = 0
        for server in server_spans:
            span_queue, span_prefill, span_decode = server_phases_ns(server.record.attributes)
            queue += span_queue
            prefill += span_prefill
            decode += span_decode
        duration = client.duration_ns
        measured = queue + prefill + decode
        if measured > duration:
            profile.anomalies.append(
                Anomaly(
                    SERVER_PHASES_EXCEED_CALL,
                    client.span_id,
                    f"the server's queue, prefill and decode add up to {measured / 1e6:.3f} ms, "
                    f"{(measured - duration) / 1e6:.3f} ms more than the call; scaled down to fit it",
                )
            )
            phases = LlmPhases(queue, prefill, decode, 0).scaled(duration) if measured else LlmPhases()
            phases.other_ns = 0
            phases.decode_ns = duration - phases.queue_ns - phases.prefill_ns
        else:
            phases = LlmPhases(queue, prefill, decode, duration - measured)
        client.llm_phases = phases
        client.llm_call_critical_path_ns = client.critical_path_ns + sum(
            span.critical_path_ns for span in _call_spans_below(client)
        )
    if servers:
        call_parts = {span.record.span_id: span for span in profile.spans if span.same_call_as is not None}
        profile.anomalies = [a for a in profile.anomalies if not _streamed_response(call_parts, a)]
        profile.anomalies.sort(key=lambda anomaly: (anomaly.kind, anomaly.span_id))
        profile.critical_path_llm_phases = critical_path_phases(profile)


def _streamed_response(call_parts: dict[str, SpanProfile], anomaly: Anomaly) -> bool:
    """Whether an overrun anomaly is a server span outliving the HTTP span of its own call."""
    if anomaly.kind != "child_outlives_parent":
        return False
    span = call_parts.get(anomaly.span_id)
    return span is not None and span.same_call_as is not None and span.end_ns <= span.same_call_as.end_ns


def calls_of(spans: list[SpanProfile]) -> list[SpanProfile]:
    """The distinct LLM calls among ``spans``: a copy of a call, its transport, server or wrapper span
    stands for the call (``same_call_as``), and an LLM span that calls no model (``core.same_call``) for
    none, unless no span is a call."""
    seen: set[int] = set()
    calls: list[SpanProfile] = []
    for span in spans:
        call = span.same_call_as
        if call is None:
            if span.category == LLM and not span.counted:
                continue
            call = span
        if id(call) not in seen:
            seen.add(id(call))
            calls.append(call)
    return calls or spans[:1]


def _call_spans_below(client: SpanProfile) -> list[SpanProfile]:
    """The spans below a client LLM span that belong to its call (transport and server spans)."""
    found: list[SpanProfile] = []
    stack = list(client.children)
    while stack:
        span = stack.pop()
        if span.same_call_as is client:
            found.append(span)
            stack.extend(span.children)
    return found


def critical_path_phases(profile: TraceProfile) -> LlmPhases:
    """The phases of the LLM time on the critical path of calls split by a server span."""
    total = LlmPhases()
    for span in profile.spans:
        phases = span.llm_phases
        if phases is not None and span.llm_call_critical_path_ns > 0:
            total.add(phases.scaled(span.llm_call_critical_path_ns))
    return total
