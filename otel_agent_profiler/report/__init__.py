"""Human-readable renderings of trace profiles."""

from typing import TYPE_CHECKING

from ..core.lazy_exports import exported_names as _exported_names, lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .text import render_trace as render_trace, render_traces as render_traces

# Each name is imported from its module on first use: a command that writes one
# rendering does not load the others.
_EXPORTED_FROM = {
    "text": ("render_trace", "render_traces"),
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = _exported_names(_EXPORTED_FROM)
