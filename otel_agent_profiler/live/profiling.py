"""The live profiling step: one trace's records in; its profile, the attributes each span gets and
the profile metrics out.

The plugin and ``serve`` differ in how spans arrive, when a trace is complete and how spans leave
(an SDK span's enriched copy, a protobuf span's); what a trace's profile is, which
``agent_profiler.*`` attributes its spans carry and which metrics it records are decided here,
once, so that the same spans give the same attributes and metrics through either. (The plugin, in
the application's process, by default writes only the essential attributes on spans other than
roots, ``all_span_attributes=False``; ``serve`` writes them all.)

Each stage after the analysis can fail alone and costs only what it adds: the calls their
servers' load, the spans their attributes, the trace its place in the averages or its metrics.
A failed analysis costs the trace its profile: its spans go out as they came, counted
``unprofiled_error``. Every failure goes through one guard (``_guard``) to the caller's report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ..adapters.recorded_attributes import RECORDED_ATTRIBUTES
from ..core.analyze import profile_trace
from ..core.backend_load import attach_backend_load
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from .enrichment import essential_span_attributes, span_attributes, trace_attributes
from .load_history import LoadHistory
from .profile_metrics import ProfileMetrics
from .profile_options import ProfileOptions
from .program_averages import ProgramAverages
from .trace_assembly import ERROR

#: What each stage's failure costs, for the log line (the keys are the ``where`` of a report).
CONSEQUENCES = {
    "profiling": "its spans go out unprofiled",
    "backend load": "its LLM calls are profiled without the inference servers' load",
    "enrichment": "its spans go out without the agent_profiler.* attributes",
    "programs": "it is left out of the per-program averages",
    "metrics": "its profile metrics are not recorded",
}

#: Called from an ``except`` block with where it failed (a key of ``CONSEQUENCES``) and the trace id.
ErrorReport = Callable[[str, str], None]


@dataclass
class ProfiledTrace:
    """What the step made of one trace.

    Attributes:
        profile: the trace's profile; None when the analysis failed.
        attributes: for each record given, in order, the attributes its span gets; None leaves
            the span as it came (not profiled, enrichment off, or enrichment failed).
    """

    profile: TraceProfile | None
    attributes: list[dict[str, Any] | None]


@dataclass
class ProfilingStep:
    """Profile a trace, attach its calls' server load, compute its span attributes, add it to the
    program averages and record its metrics.

    Args:
        options: categories, prices and context windows.
        report_error: how the caller logs a failure (each part has its own logging policy).
        metrics: gives the profile metrics, or None when there are none (the plugin makes them
            on first use); called once per trace.
        backend_load: the inference servers' recent samples, when they are polled.
        programs: the per-program averages to add each profile to, if any.
        enrich: whether to compute the span attributes.
        all_span_attributes: whether every span gets all of ``SPAN_ATTRIBUTES``; otherwise only
            roots do and the other spans get ``ESSENTIAL_SPAN_ATTRIBUTES``.
    """

    options: ProfileOptions
    report_error: ErrorReport
    _: KW_ONLY
    metrics: Callable[[], ProfileMetrics | None] = lambda: None
    backend_load: LoadHistory | None = None
    programs: ProgramAverages | None = None
    enrich: bool = True
    all_span_attributes: bool = True

    def profile(self, records: Sequence[SpanRecord], *, complete: bool, outcome: str) -> ProfiledTrace:
        """Run the step on the records of one trace (at least one).

        ``complete`` says whether the trace ended (``agent_profiler.trace.complete``); ``outcome``
        is what the trace is counted as in ``agent_profiler.traces``. Never raises (unless the
        caller's ``report_error`` does).
        """
        trace_id = records[0].trace_id if records else ""
        options = self.options
        profile: TraceProfile | None = None
        with self._guard("profiling", trace_id):
            profile = profile_trace(list(records), options.classifier, options.prices, recorded=RECORDED_ATTRIBUTES)
        if profile is None:
            self._count_unprofiled(len(records))
            return ProfiledTrace(None, [None] * len(records))
        if self.backend_load is not None:
            with self._guard("backend load", trace_id):
                attach_backend_load(profile, self.backend_load)
        # Each span left as it came unless its attributes are all computed.
        attributes: list[dict[str, Any] | None] = [None] * len(records)
        if self.enrich:
            with self._guard("enrichment", trace_id):
                attributes = self._attributes(records, profile, complete)
        if self.programs is not None:
            with self._guard("programs", trace_id):
                self.programs.add(profile)
        with self._guard("metrics", trace_id):
            metrics = self.metrics()
            if metrics is not None:
                metrics.record(profile)
                metrics.count_spans("profiled", len(records))
                metrics.count_trace(outcome)
        return ProfiledTrace(profile, attributes)

    def _attributes(
        self, records: Sequence[SpanRecord], profile: TraceProfile, complete: bool
    ) -> list[dict[str, Any] | None]:
        # Each profiled span keeps its record, so the record's identity finds a span's profile
        # without formatting its id again, and two spans that share an id keep their own.
        by_record = {id(span.record): span for span in profile.spans}
        roots = {id(root.record) for root in profile.roots}
        totals = trace_attributes(profile, complete=complete)
        windows = self.options.context_windows
        every_span_all = self.all_span_attributes
        attributes: list[dict[str, Any] | None] = []
        for record in records:
            profiled = by_record.get(id(record))
            if profiled is None:
                attributes.append(None)
                continue
            if id(record) in roots:
                extra = span_attributes(profiled, windows)
                extra.update(totals)
            elif every_span_all:
                extra = span_attributes(profiled, windows)
            else:
                extra = essential_span_attributes(profiled)
            attributes.append(extra)
        return attributes

    def _count_unprofiled(self, spans: int) -> None:
        with self._guard("metrics", ""):
            metrics = self.metrics()
            if metrics is not None:
                metrics.count_spans(ERROR, spans)

    @contextlib.contextmanager
    def _guard(self, where: str, trace_id: str) -> Iterator[None]:
        """The step's one guard: a failure in the block goes to the caller's report."""
        try:
            yield
        except Exception:
            # Not InternalErrorLog.guard: the plugin and serve log failures differently (once per
            # stage; every one, with its trace), so their report is called from here, where it can
            # log (or, under the test suite, re-raise) the error being handled.
            self.report_error(where, trace_id)
