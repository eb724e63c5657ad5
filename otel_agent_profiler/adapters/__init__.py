"""Adapters: every source of spans turned into the core's ``SpanRecord``."""

from typing import TYPE_CHECKING

from ..core.lazy_exports import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
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

# Each name is imported from its module on first use: reading a trace file needs
# the adapter of its format only.
_EXPORTED_FROM = {
    "ATIF": "files",
    "ATIF_JSON_LINES": "files",
    "JAEGER_JSON": "files",
    "OTLP_JSON": "files",
    "OTLP_JSON_LINES": "files",
    "TraceFile": "files",
    "parse_trace_bytes": "files",
    "read_trace_file": "files",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


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
