"""The service's own health as metrics: what it received, profiled and forwarded, and what it holds.

The same counts as ``GET /health``, exported with the profile metrics to the upstream, so a
dashboard can alert on spans forwarded unprofiled or failed. Observable instruments: the counts
are read when the metrics are collected, at no cost per span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

SPANS = "agent_profiler.serve.spans"
REJECTED_REQUESTS = "agent_profiler.serve.rejected_requests"
HELD_SPANS = "agent_profiler.serve.held_spans"
#: Metric data points and log records passed through, by ``agent_profiler.serve.signal`` and state.
PASSED_THROUGH = "agent_profiler.serve.passed_through"

#: Counts of /health that are span totals, by the value of ``agent_profiler.serve.state``.
SPAN_STATES = ("received", "profiled", "forwarded", "late", "over_caps", "failed", "rejected", "invalid")
#: Counts of /health's ``signals`` (metrics, logs) that are item totals.
PASSED_THROUGH_STATES = ("received", "forwarded", "failed", "rejected")


def register_service_metrics(meter: Meter, health: Callable[[], Mapping[str, Any]]) -> None:
    """Observe ``health()["counts"]`` and ``health()["signals"]`` (the /health document) through ``meter``."""

    def counts() -> Mapping[str, Any]:
        current = health().get("counts")
        return current if isinstance(current, Mapping) else {}

    def spans(options: CallbackOptions) -> Iterable[Observation]:
        current = counts()
        return [Observation(int(current.get(state, 0)), {"agent_profiler.serve.state": state}) for state in SPAN_STATES]

    def rejected(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(int(counts().get("rejected_requests", 0)))]

    def passed_through(options: CallbackOptions) -> Iterable[Observation]:
        signals = health().get("signals")
        if not isinstance(signals, Mapping):
            return []
        return [
            Observation(
                int(counts.get(state, 0)), {"agent_profiler.serve.signal": name, "agent_profiler.serve.state": state}
            )
            for name, counts in signals.items()
            if isinstance(counts, Mapping)
            for state in PASSED_THROUGH_STATES
        ]

    def held(options: CallbackOptions) -> Iterable[Observation]:
        current = counts()
        return [
            Observation(int(current.get("held_spans", 0)), {"agent_profiler.serve.state": "assembling"}),
            Observation(int(current.get("pending_spans", 0)), {"agent_profiler.serve.state": "forwarding"}),
        ]

    meter.create_observable_counter(
        SPANS, [spans], unit="{span}", description="Spans the service received, profiled, forwarded, ..."
    )
    meter.create_observable_counter(
        REJECTED_REQUESTS, [rejected], unit="{request}", description="Requests answered with a retryable status"
    )
    meter.create_observable_counter(
        PASSED_THROUGH,
        [passed_through],
        unit="{item}",
        description=(
            "Metric data points and log records passed through to the upstream: received, forwarded, failed, rejected"
        ),
    )
    meter.create_observable_gauge(
        HELD_SPANS, [held], unit="{span}", description="Spans held: waiting for their trace, or to be forwarded"
    )
