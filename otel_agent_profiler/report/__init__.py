"""Human-readable renderings of trace profiles."""

from typing import TYPE_CHECKING

from ..core.lazy_exports import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .text import render_trace, render_traces

# Each name is imported from its module on first use: a command that writes one
# rendering does not load the others.
_EXPORTED_FROM = {
    "render_trace": "text",
    "render_traces": "text",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = ["render_trace", "render_traces"]
