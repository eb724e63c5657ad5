"""What a span says was recorded about it before this analysis, read through a reader from outside the core.

A trace the live profiler enriched, or an ATIF run that billed its steps, carries values the
analysis takes as given instead of computing them: the load an LLM call met on its inference
server, and the cost of a call. How such values are spelled on a span is the package's own wire
format (``adapters/recorded_attributes.py``), which the core does not know: ``profile_trace``
asks a ``RecordedValues`` reader for them.

The reader is an argument (``recorded=``), as the core holds no state: every part of the package
passes ``adapters.recorded_attributes.RECORDED_ATTRIBUTES``, and so do the package's own
``otel_agent_profiler.profile_records`` and ``profile_trace``. Without one, nothing recorded is read.
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

    def timing_estimated(self, attributes: Mapping[str, AttributeValue]) -> bool:
        """Whether the span's times were laid out by its adapter (an ATIF step's calls), not measured.

        Called once per span: an implementation should answer a span without the mark quickly.
        """
        ...
