"""Human-readable renderings of trace profiles."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .text import render_trace, render_traces

# Each name is imported from its module on first use: a command that writes one
# rendering does not load the others.
_EXPORTED_FROM = {
    "render_trace": "text",
    "render_traces": "text",
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


__all__ = ["render_trace", "render_traces"]
