"""The report the live profiler prints to standard error when the process exits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from ..core.findings import find_all
from ..core.profile import TraceProfile
from ..core.units import plural
from .text import can_draw, render_traces


def write_console_report(stream: TextIO, recent: Sequence[TraceProfile], profiled_traces: int) -> None:
    """Write the ``recent`` profiles, with their findings, out of ``profiled_traces`` profiled in all."""
    if not recent:
        stream.write("otel-agent-profiler: no traces were profiled.\n")
        return
    skipped = profiled_traces - len(recent)
    header = f"otel-agent-profiler: {plural(profiled_traces, 'trace')} profiled"
    header += f"; the last {len(recent)} follow\n\n" if skipped else "\n\n"
    findings = {profile.trace_id: find_all(profile) for profile in recent}
    stream.write(header + render_traces(recent, ascii_only=not can_draw(stream), findings=findings))
    stream.flush()
