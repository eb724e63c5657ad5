"""Profile metrics, recorded through the OpenTelemetry metrics API.

Names follow OpenTelemetry conventions (seconds, ``{token}``); time to first token uses the
GenAI name ``gen_ai.client.operation.time_to_first_chunk``, which the OpenAI instrumentation
does not emit (it has ``gen_ai.server.time_to_first_token``). Durations of whole LLM calls are
left to the instrumentations (``gen_ai.client.operation.duration``).

Two histograms, whose distributions people ask about: the duration of traces (one record per
trace) and the time to first chunk of streaming LLM calls (one per call, as the instrumentations
record their own durations). Everything else is a running total read by an observable counter:
self time and critical-path time by operation, and the tokens and cost on the critical path. The
question those answer is where the time and money went, summed over runs, and a sum divided by
the trace count (``agent_profiler.traces``) is the mean per trace. Adding to a total costs well
under a microsecond, where an SDK record costs several: as histograms, these metrics took about
25 records per agent trace and more CPU than the profile itself. A share of the critical path
is one total over another (``docs/reference/attributes.md`` shows the PromQL).

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
from ..core.profile import SpanProfile, TraceProfile

SELF_TIME = "agent_profiler.operation.self_time"
CRITICAL_PATH_TIME = "agent_profiler.operation.critical_path_time"
TRACE_DURATION = "agent_profiler.trace.duration"
CRITICAL_PATH_TOKENS = "agent_profiler.trace.critical_path.tokens"
CRITICAL_PATH_COST = "agent_profiler.trace.critical_path.cost"
TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
SPANS = "agent_profiler.spans"
TRACES = "agent_profiler.traces"

_OPERATION_KEYS = ("agent_profiler.category", "agent_profiler.operation")
_ROOT_KEYS = ("agent_profiler.root_operation",)
_TOKEN_KEYS = ("agent_profiler.root_operation", "gen_ai.token.type")
_OUTCOME_KEYS = ("agent_profiler.outcome",)

#: Every metric this module can emit: name -> (instrument, unit, attribute keys). A counter's
#: value is a running total since the process started.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    SELF_TIME: ("counter", "s", _OPERATION_KEYS),
    CRITICAL_PATH_TIME: ("counter", "s", _OPERATION_KEYS),
    TRACE_DURATION: ("histogram", "s", _ROOT_KEYS),
    CRITICAL_PATH_TOKENS: ("counter", "{token}", _TOKEN_KEYS),
    CRITICAL_PATH_COST: ("counter", "{USD}", _ROOT_KEYS),
    TIME_TO_FIRST_CHUNK: (
        "histogram",
        "s",
        ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name", "agent_profiler.on_critical_path"),
    ),
    SPANS: ("counter", "{span}", _OUTCOME_KEYS),
    TRACES: ("counter", "{trace}", _OUTCOME_KEYS),
}

OTHER = "other"

# Agent latencies run from milliseconds (tools, retrieval) to minutes (whole runs).
_SECONDS_BUCKETS: list[float] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]

_HISTOGRAMS: dict[str, str] = {
    TRACE_DURATION: "Duration of profiled traces",
    TIME_TO_FIRST_CHUNK: "Time from the start of a streaming LLM call to its first chunk",
}

# name -> (description, scale from the amounts added to the unit's).
_TOTALS: dict[str, tuple[str, float]] = {
    SELF_TIME: (
        "Self time (duration minus the time covered by children) of an operation's spans, summed over traces",
        1e-9,
    ),
    CRITICAL_PATH_TIME: ("Critical-path time of an operation's spans, summed over traces", 1e-9),
    CRITICAL_PATH_TOKENS: ("Tokens of the LLM calls on the traces' critical paths, summed over traces", 1),
    CRITICAL_PATH_COST: ("Cost of the priced LLM calls on the traces' critical paths, summed over traces", 1),
    SPANS: ("Spans seen, by what became of them", 1),
    TRACES: ("Traces seen, by what became of them", 1),
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


class RunningTotals:
    """Totals by attribute values, observed by an observable counter when metrics are collected.

    Times are added in integer nanoseconds, so that a total is exact however many traces it sums,
    and scaled to seconds when observed.
    """

    def __init__(self, keys: tuple[str, ...], scale: float = 1) -> None:
        self._keys = keys
        self._scale = scale
        self._totals: dict[tuple[Any, ...], float] = {}
        # Added to from the worker and the application's threads, read from the reader's.
        self._lock = threading.Lock()

    def add(self, amounts: Iterable[tuple[tuple[Any, ...], float]]) -> None:
        """Add each (attribute values, amount), under one hold of the lock."""
        with self._lock:
            totals = self._totals
            for values, amount in amounts:
                totals[values] = totals.get(values, 0) + amount

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._totals.items())
        keys, scale = self._keys, self._scale
        return [
            Observation(total * scale if scale != 1 else total, dict(zip(keys, values, strict=True)))
            for values, total in totals
        ]


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
        self._trace_duration = _histogram(meter, TRACE_DURATION)
        self._ttft = _histogram(meter, TIME_TO_FIRST_CHUNK)
        totals = {name: _running_total(meter, name) for name in _TOTALS}
        self._self_time = totals[SELF_TIME]
        self._critical_path_time = totals[CRITICAL_PATH_TIME]
        self._tokens = totals[CRITICAL_PATH_TOKENS]
        self._cost = totals[CRITICAL_PATH_COST]
        self._spans = totals[SPANS]
        self._traces = totals[TRACES]

    def count_spans(self, outcome: str, count: int = 1) -> None:
        if count:
            self._spans.add((((outcome,), count),))

    def count_trace(self, outcome: str) -> None:
        self._traces.add((((outcome,), 1),))

    def record(self, profile: TraceProfile) -> None:
        operation_of = self._operation
        self_times: list[tuple[tuple[str, str], int]] = []
        critical_times: list[tuple[tuple[str, str], int]] = []
        for (category, operation), op in profile.operations.items():
            # Several operations past the cap are all "other": their amounts add up.
            key = (category, operation_of(operation))
            self_times.append((key, op.self_time_ns))
            critical_times.append((key, op.critical_path_ns))
        self._self_time.add(self_times)
        self._critical_path_time.add(critical_times)
        if profile.llm_calls:
            for span in profile.spans:
                if span.time_to_first_token_ns is not None and span.counted:
                    self._ttft.record(
                        span.time_to_first_token_ns / 1e9, _ttft_attributes(span.record.attributes, span, operation_of)
                    )

        root = operation_of(profile.roots[0].operation) if profile.roots else OTHER
        self._trace_duration.record(profile.duration_ns / 1e9, {"agent_profiler.root_operation": root})
        tokens = profile.critical_path_tokens
        if profile.llm_calls or not tokens.is_empty():
            self._tokens.add((((root, "input"), tokens.input), ((root, "output"), tokens.output)))
        if profile.critical_path_cost_usd is not None:
            self._cost.add((((root,), profile.critical_path_cost_usd),))


def _histogram(meter: metrics.Meter, name: str) -> metrics.Histogram:
    unit, description = METRICS[name][1], _HISTOGRAMS[name]
    try:
        return meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS
        )
    except TypeError:
        # A metrics API older than the bucket advisory (API 1.23) or one of another vendor: the
        # histogram gets that meter's default buckets rather than none at all.
        return meter.create_histogram(name, unit=unit, description=description)


def _running_total(meter: metrics.Meter, name: str) -> RunningTotals:
    _instrument, unit, keys = METRICS[name]
    description, scale = _TOTALS[name]
    totals = RunningTotals(keys, scale)
    meter.create_observable_counter(name, [totals.observe], unit=unit, description=description)
    return totals


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
