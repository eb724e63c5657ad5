"""otel-agent-profiler: where an LLM agent run spends its time.

Self time, critical path and category breakdowns (llm, tool, agent, retrieval, embedding,
memory, internal) of OpenTelemetry traces, with tokens and time to first token beside them.
"""

from __future__ import annotations

from collections.abc import Iterable as _Iterable
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._version import __version__
from .core.categories import classify
from .core.lazy_exports import lazy_attributes as _lazy_attributes

if _TYPE_CHECKING:
    from .adapters import TraceFile, read_trace_file
    from .core import (
        CATEGORIES,
        Anomaly,
        ModelPrice,
        PriceTable,
        SpanEvent,
        SpanKind,
        SpanLink,
        SpanProfile,
        SpanRecord,
        StatusCode,
        TokenUsage,
        TraceProfile,
        profiles_to_dict,
        trace_to_dict,
    )
    from .core import Classifier as _Classifier
    from .errors import AgentProfilerError
    from .plugin.decorators import agent, agent_span, profiled_span, tool, tool_span, traced
    from .plugin.processor import AgentProfilerSpanProcessor
    from .plugin.wiring import install


def profile_trace(
    records: list[SpanRecord], classifier: _Classifier = classify, prices: PriceTable | None = None
) -> TraceProfile:
    """Profile the spans of one trace (all records must share one trace id).

    ``classifier`` decides categories (default: the conventions in ``core.categories.classify``);
    ``prices``, when given, adds the cost of LLM and embedding calls. What an earlier run recorded
    on the spans, a cost ATIF billed or a server load a live profiler met, is read as
    ``otel-agent-profiler`` writes it (``core.profile_trace`` reads only what its ``recorded=`` reads).
    """
    from .adapters.recorded_attributes import RECORDED_ATTRIBUTES
    from .core.analyze import profile_trace as core_profile_trace

    return core_profile_trace(records, classifier, prices, recorded=RECORDED_ATTRIBUTES)


def profile_records(
    records: _Iterable[SpanRecord], classifier: _Classifier = classify, prices: PriceTable | None = None
) -> list[TraceProfile]:
    """Profile every trace found in ``records``, ordered by start time, then trace id (arguments and
    what is read of earlier recordings: see ``profile_trace``)."""
    from .adapters.recorded_attributes import RECORDED_ATTRIBUTES
    from .core.analyze import profile_records as core_profile_records

    return core_profile_records(records, classifier, prices, recorded=RECORDED_ATTRIBUTES)


# Each name is imported from its module on first use, so that the command line, which imports
# this package first, loads only what its command needs. The in-process plugin loads the
# OpenTelemetry SDK, which the command line never needs.
_EXPORTED_FROM = {
    "TraceFile": "adapters",
    "read_trace_file": "adapters",
    "CATEGORIES": "core",
    "Anomaly": "core",
    "ModelPrice": "core",
    "PriceTable": "core",
    "SpanEvent": "core",
    "SpanKind": "core",
    "SpanLink": "core",
    "SpanProfile": "core",
    "SpanRecord": "core",
    "StatusCode": "core",
    "TokenUsage": "core",
    "TraceProfile": "core",
    "profiles_to_dict": "core",
    "trace_to_dict": "core",
    "AgentProfilerError": "errors",
    "agent": "plugin.decorators",
    "agent_span": "plugin.decorators",
    "profiled_span": "plugin.decorators",
    "tool": "plugin.decorators",
    "tool_span": "plugin.decorators",
    "traced": "plugin.decorators",
    "AgentProfilerSpanProcessor": "plugin.processor",
    "install": "plugin.wiring",
}


__getattr__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())[0]


__all__ = [
    "CATEGORIES",
    "AgentProfilerError",
    "AgentProfilerSpanProcessor",
    "Anomaly",
    "ModelPrice",
    "PriceTable",
    "SpanEvent",
    "SpanKind",
    "SpanLink",
    "SpanProfile",
    "SpanRecord",
    "StatusCode",
    "TokenUsage",
    "TraceFile",
    "TraceProfile",
    "__version__",
    "agent",
    "agent_span",
    "classify",
    "install",
    "profile_records",
    "profile_trace",
    "profiled_span",
    "profiles_to_dict",
    "read_trace_file",
    "tool",
    "tool_span",
    "trace_to_dict",
    "traced",
]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
