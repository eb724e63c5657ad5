"""Adapters: every source of spans turned into the core's ``SpanRecord``."""

from typing import TYPE_CHECKING

from ..core.lazy_exports import exported_names as _exported_names, lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .files import (
        ATIF as ATIF,
        ATIF_JSON_LINES as ATIF_JSON_LINES,
        JAEGER_JSON as JAEGER_JSON,
        OTLP_JSON as OTLP_JSON,
        OTLP_JSON_LINES as OTLP_JSON_LINES,
        TraceFile as TraceFile,
        parse_trace_bytes as parse_trace_bytes,
        read_trace_file as read_trace_file,
    )

# Each name is imported from its module on first use: reading a trace file needs
# the adapter of its format only.
_EXPORTED_FROM = {
    "files": (
        "ATIF",
        "ATIF_JSON_LINES",
        "JAEGER_JSON",
        "OTLP_JSON",
        "OTLP_JSON_LINES",
        "TraceFile",
        "parse_trace_bytes",
        "read_trace_file",
    ),
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = _exported_names(_EXPORTED_FROM)
