"""otel-agent-profiler: where an LLM agent run spends its time.

Self time, critical path and category breakdowns (llm, tool, agent, retrieval, embedding,
memory, internal) of OpenTelemetry traces, with tokens and time to first token beside them.
"""

from ._version import __version__
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
    classify,
    profile_records,
    profile_trace,
    profiles_to_dict,
    trace_to_dict,
)
from .errors import AgentProfilerError
from .plugin.decorators import agent, agent_span, profiled_span, tool, tool_span, traced
from .plugin.processor import AgentProfilerSpanProcessor
from .plugin.wiring import install

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
