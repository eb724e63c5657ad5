"""Adapters: every source of spans turned into the core's ``SpanRecord``."""

from .files import (
    ATIF,
    ATIF_JSON_LINES,
    JAEGER_JSON,
    OTLP_JSON,
    OTLP_JSON_LINES,
    TraceFile,
    parse_trace_bytes,
    read_trace_file,
)

__all__ = [
    "ATIF",
    "ATIF_JSON_LINES",
    "JAEGER_JSON",
    "OTLP_JSON",
    "OTLP_JSON_LINES",
    "TraceFile",
    "parse_trace_bytes",
    "read_trace_file",
]
