"""How ``analyze`` profiles and reports: decided once, from the command line, then only read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.findings import FindingOptions


@dataclass(frozen=True)
class AnalyzeOptions:
    """Every choice ``offline.analysis.analyze_inputs`` and the report make, already resolved."""

    #: ``"text"`` or ``"json"``.
    format: str
    #: Whether to make the traces' findings (a projection per trace each).
    findings: bool
    finding_options: FindingOptions
    #: Spans shown per trace in the span tree.
    max_spans: int
    #: Text report of many traces: the slowest traces shown in detail (unless ``every_trace``).
    top: int
    #: The what-ifs to project together (``--what-if``): (selector, speedup) pairs.
    what_if: tuple[tuple[str, float], ...] = ()
    #: Also list prompt-prefix caching candidates (needs the traces in memory).
    prefix_cache: bool = False
    #: Profile on disk (True), in memory (False), or decide by the inputs' size (None).
    on_disk: bool | None = None
    #: Worker processes (``--workers``); None: decided by the input's size.
    workers: int | None = None
    #: The length a report of many traces is fitted to; None: not fitted (``--max-spans`` was given).
    max_lines: int | None = None
    #: Text report of many traces: show every trace in detail (``--all``), in input order.
    every_trace: bool = False
    ascii_only: bool = False
    #: The traces of the files to report (``--trace``), as 32 lowercase hex digits; empty: every trace.
    trace_ids: tuple[str, ...] = ()
    #: Where the report goes (``--output``); None: standard output.
    output: str | None = None
