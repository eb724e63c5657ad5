"""Profile metrics, recorded through the OpenTelemetry metrics API.

Names follow OpenTelemetry conventions (seconds, ``{token}``); time to first token uses the
GenAI name ``gen_ai.client.operation.time_to_first_chunk``, which the OpenAI instrumentation
does not emit (it has ``gen_ai.server.time_to_first_token``). Durations of whole LLM calls are
left to the instrumentations (``gen_ai.client.operation.duration``).

Self time and critical-path time are recorded once per operation of a trace (the sum over
the operation's spans in that trace), not once per span: critical-path time is a property of
the whole trace anyway, and an SDK histogram record costs several microseconds, which per span
would cost more CPU than the rest of the profiler. Per-call latencies of LLM calls are the
instrumentations' ``gen_ai.client.operation.duration``.

The span and trace counts are observable counters: the profiler adds to plain integers, and
the SDK reads them when it collects, so counting costs nothing like a record per trace.

Attribute values come from small fixed sets (categories, token types, outcomes) or from
operation names, which are capped: past ``max_operations`` distinct names, new ones are
recorded as ``other``. No ids, prompts or completions are ever attribute values.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from .._version import __version__
from ..core.categories import CATEGORIES
from ..core.profile import SpanProfile, TraceProfile

SELF_TIME = "agent_profiler.operation.self_time"
CRITICAL_PATH_TIME = "agent_profiler.operation.critical_path_time"
TRACE_DURATION = "agent_profiler.trace.duration"
CRITICAL_PATH_SHARE = "agent_profiler.trace.critical_path.share"
CRITICAL_PATH_TOKENS = "agent_profiler.trace.critical_path.tokens"
CRITICAL_PATH_COST = "agent_profiler.trace.critical_path.cost"
TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
SPANS = "agent_profiler.spans"
TRACES = "agent_profiler.traces"

#: Every metric this module can emit: name -> (instrument, unit, attribute keys).
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    SELF_TIME: ("histogram", "s", ("agent_profiler.category", "agent_profiler.operation")),
    CRITICAL_PATH_TIME: ("histogram", "s", ("agent_profiler.category", "agent_profiler.operation")),
    TRACE_DURATION: ("histogram", "s", ("agent_profiler.root_operation",)),
    CRITICAL_PATH_SHARE: ("histogram", "1", ("agent_profiler.root_operation", "agent_profiler.category")),
    CRITICAL_PATH_TOKENS: ("histogram", "{token}", ("agent_profiler.root_operation", "gen_ai.token.type")),
    CRITICAL_PATH_COST: ("histogram", "{USD}", ("agent_profiler.root_operation",)),
    TIME_TO_FIRST_CHUNK: (
        "histogram",
        "s",
        ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name", "agent_profiler.on_critical_path"),
    ),
    SPANS: ("counter", "{span}", ("agent_profiler.outcome",)),
    TRACES: ("counter", "{trace}", ("agent_profiler.outcome",)),
}

OTHER = "other"

# Agent latencies run from milliseconds (tools, retrieval) to minutes (whole runs).
_SECONDS_BUCKETS: list[float] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]
_SHARE_BUCKETS: list[float] = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]
_TOKEN_BUCKETS: list[float] = [100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000]
_COST_BUCKETS: list[float] = [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]


_HISTOGRAMS: dict[str, tuple[str, list[float]]] = {
    SELF_TIME: (
        "Self time (duration minus the time covered by children) of one operation's spans in one trace",
        _SECONDS_BUCKETS,
    ),
    CRITICAL_PATH_TIME: ("Critical-path time of one operation's spans in one trace", _SECONDS_BUCKETS),
    TRACE_DURATION: ("Duration of profiled traces", _SECONDS_BUCKETS),
    CRITICAL_PATH_SHARE: ("Share of a trace's critical path spent in each category", _SHARE_BUCKETS),
    CRITICAL_PATH_TOKENS: ("Tokens of the LLM calls on a trace's critical path", _TOKEN_BUCKETS),
    CRITICAL_PATH_COST: ("Cost of the priced LLM calls on a trace's critical path", _COST_BUCKETS),
    TIME_TO_FIRST_CHUNK: ("Time from the start of a streaming LLM call to its first chunk", _SECONDS_BUCKETS),
}


class OperationNames:
    """Caps the distinct operation names used as attribute values."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        if name in self._seen:
            return name
        with self._lock:
            if len(self._seen) >= self._limit:
                return OTHER
            self._seen.add(name)
        return name


class OutcomeCounts:
    """Running totals by outcome, observed by an observable counter when metrics are collected."""

    def __init__(self) -> None:
        self._totals: dict[str, int] = {}
        # Added to from the worker and the application's threads, read from the reader's.
        self._lock = threading.Lock()

    def add(self, outcome: str, count: int) -> None:
        with self._lock:
            self._totals[outcome] = self._totals.get(outcome, 0) + count

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._totals.items())
        return [Observation(total, {"agent_profiler.outcome": outcome}) for outcome, total in totals]


class ProfileMetrics:
    """Instruments for the profile metrics, and recording one profiled trace into them."""

    def __init__(self, meter_provider: MeterProvider | None = None, max_operations: int = 100) -> None:
        # Without an explicit provider the global one is used through the API's proxy, so a
        # provider set up after us (as the zero-code setup does) still receives the data.
        if meter_provider is None:
            meter = metrics.get_meter("otel_agent_profiler", __version__)
        else:
            meter = meter_provider.get_meter("otel_agent_profiler", __version__)
        self._operation = OperationNames(max_operations)
        histograms = {
            name: _histogram(meter, name, METRICS[name][1], description, buckets)
            for name, (description, buckets) in _HISTOGRAMS.items()
        }
        self._self_time = histograms[SELF_TIME]
        self._critical_path_time = histograms[CRITICAL_PATH_TIME]
        self._trace_duration = histograms[TRACE_DURATION]
        self._share = histograms[CRITICAL_PATH_SHARE]
        self._tokens = histograms[CRITICAL_PATH_TOKENS]
        self._cost = histograms[CRITICAL_PATH_COST]
        self._ttft = histograms[TIME_TO_FIRST_CHUNK]
        self._spans = OutcomeCounts()
        self._traces = OutcomeCounts()
        meter.create_observable_counter(
            SPANS, [self._spans.observe], unit="{span}", description="Spans seen, by what became of them"
        )
        meter.create_observable_counter(
            TRACES, [self._traces.observe], unit="{trace}", description="Traces seen, by what became of them"
        )

    def count_spans(self, outcome: str, count: int = 1) -> None:
        if count:
            self._spans.add(outcome, count)

    def count_trace(self, outcome: str) -> None:
        self._traces.add(outcome, 1)

    def record(self, profile: TraceProfile) -> None:
        operation_of = self._operation
        per_operation: dict[tuple[str, str], list[int]] = {}
        for (category, operation), op in profile.operations.items():
            key = (category, operation_of(operation))
            totals = per_operation.get(key)
            if totals is None:
                per_operation[key] = [op.self_time_ns, op.critical_path_ns]
            else:  # several operations past the cap, all "other"
                totals[0] += op.self_time_ns
                totals[1] += op.critical_path_ns
        for (category, operation), (self_ns, critical_ns) in per_operation.items():
            attributes = {"agent_profiler.category": category, "agent_profiler.operation": operation}
            self._self_time.record(self_ns / 1e9, attributes)
            self._critical_path_time.record(critical_ns / 1e9, attributes)
        if profile.llm_calls:
            for span in profile.spans:
                if span.time_to_first_token_ns is not None and span.counted:
                    self._ttft.record(
                        span.time_to_first_token_ns / 1e9, _ttft_attributes(span.record.attributes, span, operation_of)
                    )

        root = operation_of(profile.roots[0].operation) if profile.roots else OTHER
        trace_attributes = {"agent_profiler.root_operation": root}
        self._trace_duration.record(profile.duration_ns / 1e9, trace_attributes)
        critical = profile.critical_path_ns
        if critical:
            for category in CATEGORIES:
                stats = profile.categories[category]
                if not stats.count:
                    # Recording zeros for absent categories would cost as much as the rest together.
                    continue
                attributes = {"agent_profiler.root_operation": root, "agent_profiler.category": category}
                self._share.record(stats.critical_path_ns / critical, attributes)
        tokens = profile.critical_path_tokens
        if profile.llm_calls or not tokens.is_empty():
            for token_type, value in (("input", tokens.input), ("output", tokens.output)):
                self._tokens.record(value, {"agent_profiler.root_operation": root, "gen_ai.token.type": token_type})
        if profile.critical_path_cost_usd is not None:
            self._cost.record(profile.critical_path_cost_usd, trace_attributes)


def _histogram(meter: metrics.Meter, name: str, unit: str, description: str, buckets: Any) -> metrics.Histogram:
    try:
        return meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:
        # A metrics API older than the bucket advisory (API 1.23) or one of another vendor: the
        # histogram gets that meter's default buckets rather than none at all.
        return meter.create_histogram(name, unit=unit, description=description)


def _ttft_attributes(original: Mapping[str, Any], span: SpanProfile, operation_of: OperationNames) -> dict[str, Any]:
    # Only LLM spans have a time to first token, so the span's own operation name applies.
    attributes = {
        "gen_ai.operation.name": original.get("gen_ai.operation.name", "chat"),
        "gen_ai.request.model": operation_of(span.model or span.operation),
        "agent_profiler.on_critical_path": span.on_critical_path,
    }
    provider = original.get("gen_ai.provider.name") or original.get("gen_ai.system")
    if isinstance(provider, str):
        attributes["gen_ai.provider.name"] = provider
    return attributes
