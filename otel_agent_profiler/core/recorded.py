"""What a span says was recorded about it before this analysis, read through a reader from outside the core.

A trace the live profiler enriched, or an ATIF run that billed its steps, carries values the
analysis takes as given instead of computing them: the load an LLM call met on its inference
server, and the cost of a call. How such values are spelled on a span is the package's own wire
format (``adapters/recorded_attributes.py``), which the core does not know: ``profile_trace``
asks a ``RecordedValues`` reader for them.

The package registers its reader when it is imported (``otel_agent_profiler/__init__.py``), so
``profile_trace`` and ``profile_records`` called without one read what they always read; the
core alone, unregistered, reads nothing recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .profile import BackendLoad
from .records import AttributeValue


class RecordedValues(Protocol):
    """Reads the values recorded on a span from its attributes; None where the span has none.

    Called once per LLM span (``backend_load``) and once per counted LLM or embedding call
    (``cost_usd``), so an implementation should answer a span without the value quickly.
    """

    def backend_load(self, attributes: Mapping[str, AttributeValue]) -> BackendLoad | None:
        """The load an LLM call met on its inference server, as recorded on its span."""
        ...

    def cost_usd(self, attributes: Mapping[str, AttributeValue]) -> float | None:
        """The cost of a call as the run recorded it, in US dollars: what was billed, used before any price table."""
        ...


# Set once, when the package is imported; a plain reference, read once per trace profiled.
_default: RecordedValues | None = None


def read_by_default(reader: RecordedValues | None) -> None:
    """Make ``reader`` what ``profile_trace`` reads when given none (None: read nothing recorded)."""
    global _default
    _default = reader


def default_reader() -> RecordedValues | None:
    """The reader ``profile_trace`` uses when given none."""
    return _default
