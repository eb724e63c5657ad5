"""Adapters: every source of spans turned into the core's ``SpanRecord``."""

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTED_FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
