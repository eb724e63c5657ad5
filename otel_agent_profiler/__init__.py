"""otel-agent-profiler: where an LLM agent run spends its time.

Self time, critical path and category breakdowns (llm, tool, agent, retrieval, embedding,
memory, internal) of OpenTelemetry traces, with tokens and time to first token beside them.
"""

import importlib as _importlib
from collections.abc import Iterable as _Iterable
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__
from .adapters import TraceFile, read_trace_file
from .adapters.recorded_attributes import RECORDED_ATTRIBUTES as _RECORDED_ATTRIBUTES
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
    classify,
    profiles_to_dict,
    trace_to_dict,
)
from .core import Classifier as _Classifier
from .core import profile_records as _core_profile_records
from .core import profile_trace as _core_profile_trace
from .errors import AgentProfilerError


def profile_trace(
    records: list[SpanRecord], classifier: _Classifier = classify, prices: PriceTable | None = None
) -> TraceProfile:
    """Profile the spans of one trace (all records must share one trace id).

    ``classifier`` decides categories (default: the conventions in ``core.categories.classify``);
    ``prices``, when given, adds the cost of LLM and embedding calls. What an earlier run recorded
    on the spans, a cost ATIF billed or a server load a live profiler met, is read as
    ``otel-agent-profiler`` writes it (``core.profile_trace`` reads only what its ``recorded=`` reads).
    """
    return _core_profile_trace(records, classifier, prices, recorded=_RECORDED_ATTRIBUTES)


def profile_records(
    records: _Iterable[SpanRecord], classifier: _Classifier = classify, prices: PriceTable | None = None
) -> list[TraceProfile]:
    """Profile every trace found in ``records``, ordered by start time, then trace id (arguments and
    what is read of earlier recordings: see ``profile_trace``)."""
    return _core_profile_records(records, classifier, prices, recorded=_RECORDED_ATTRIBUTES)


if _TYPE_CHECKING:
    from .plugin.decorators import agent, agent_span, profiled_span, tool, tool_span, traced
    from .plugin.processor import AgentProfilerSpanProcessor
    from .plugin.wiring import install

# The in-process plugin loads the OpenTelemetry SDK: imported on first use, so that the command
# line (which never needs it) starts a few hundred milliseconds sooner.
_PLUGIN = {
    "agent": "decorators",
    "agent_span": "decorators",
    "profiled_span": "decorators",
    "tool": "decorators",
    "tool_span": "decorators",
    "traced": "decorators",
    "AgentProfilerSpanProcessor": "processor",
    "install": "wiring",
}


def __getattr__(name: str) -> _Any:
    module = _PLUGIN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".plugin.{module}", __name__), name)
    globals()[name] = value
    return value


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
