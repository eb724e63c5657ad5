"""Getting the profiler into an application: ``install()``, and the zero-code start.

Profile attributes can only reach the exported spans if the profiler sits in front of the
exporting processors. So wiring a provider means: take its exporting processors
(``BatchSpanProcessor``, ``SimpleSpanProcessor``) off the provider and hand them to the
profiler as its downstream; other processors stay where they are. If a provider cannot be
rewired (an unexpected SDK layout), the profiler is added alongside in profiling-only mode:
metrics and the console report still work, and spans are exported as they were.

Zero-code: ``opentelemetry-instrument`` runs the first ``opentelemetry_configurator`` entry
point. Ours sets the SDK up with traces and metrics defaulting to OTLP and the profiler in
front of the span exporters. When another configurator wins (or declarative configuration
is used), our ``opentelemetry_post_instrument`` hook wires the profiler into the provider it
made.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from typing_extensions import Unpack

from .. import _sdk_internals
from .._sdk_internals import SdkConfigurator, configure_sdk, replace_span_processors, span_processors
from ..errors import handle_internal_errors
from .config import ProfilerOptions, enabled_in_environment
from .export_accounting import AccountingSpanExporter
from .processor import AgentProfilerSpanProcessor

_logger = logging.getLogger(__name__)

#: Processors that export: they are put behind the profiler so they receive enriched spans.
EXPORTING_PROCESSORS: tuple[type[SpanProcessor], ...] = (BatchSpanProcessor, SimpleSpanProcessor)


def find_profiler(provider: TracerProvider) -> AgentProfilerSpanProcessor | None:
    """The profiler already wired into ``provider``, if any."""
    for processor in span_processors(provider):
        if isinstance(processor, AgentProfilerSpanProcessor):
            return processor
    return None


def install(
    tracer_provider: TracerProvider | None = None,
    *,
    span_exporter: SpanExporter | None = None,
    meter_provider: MeterProvider | None = None,
    **options: Unpack[ProfilerOptions],
) -> AgentProfilerSpanProcessor:
    """Profile every trace of ``tracer_provider`` (default: the global one).

    The provider's exporting processors are moved behind the profiler, so they export spans
    carrying the profile attributes. ``span_exporter``, when given, is added as one more
    export destination. Calling it again returns the profiler already installed.

    Args:
        tracer_provider: an SDK ``TracerProvider``; the global one when omitted.
        span_exporter: an extra exporter for the enriched spans.
        meter_provider: for the profile metrics; the global one when omitted.
        **options: profiler options (``ProfilerOptions``; see ``AgentProfilerSpanProcessor``).

    Returns:
        The profiler.

    Raises:
        ValueError: no SDK ``TracerProvider`` to install into, or a bad option.
    """
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise ValueError(
            "otel_agent_profiler.install() needs an OpenTelemetry SDK TracerProvider: set one with "
            "opentelemetry.trace.set_tracer_provider(...) first, or pass tracer_provider=..."
        )
    existing = find_profiler(provider)
    if existing is not None:
        if options or span_exporter is not None or meter_provider is not None:
            _logger.warning("otel-agent-profiler is already installed on this provider; new options are ignored")
        return existing
    profiler = AgentProfilerSpanProcessor(span_exporter, meter_provider=meter_provider, **options)
    _put_in_front_of_exporters(provider, profiler)
    return profiler


_flushed_at_exit: weakref.WeakSet[AgentProfilerSpanProcessor] = weakref.WeakSet()


def _flush_before_providers_shut_down(profiler: AgentProfilerSpanProcessor) -> None:
    # At exit, handlers run last-registered first: registered after the SDK's providers were
    # made, this flush runs while the MeterProvider can still take the last traces' metrics.
    if profiler not in _flushed_at_exit:
        _flushed_at_exit.add(profiler)
        atexit.register(_flush_at_exit, weakref.ref(profiler))


def _flush_at_exit(ref: weakref.ref[AgentProfilerSpanProcessor]) -> None:
    profiler = ref()
    if profiler is not None:
        # Not force_flush, which leaves the traces still running held for their later spans:
        # none will come, and their metrics must be recorded before the MeterProvider shuts down.
        profiler.flush_at_exit(timeout_millis=10_000)


def _put_in_front_of_exporters(provider: TracerProvider, profiler: AgentProfilerSpanProcessor) -> None:
    def profiler_in_front(current: tuple[SpanProcessor, ...]) -> tuple[SpanProcessor, ...]:
        exporting = [p for p in current if isinstance(p, EXPORTING_PROCESSORS)]
        others = tuple(p for p in current if not isinstance(p, EXPORTING_PROCESSORS))
        for processor in exporting:
            profiler.add_downstream(processor)
        return (*others, profiler)

    if not replace_span_processors(provider, profiler_in_front):
        _logger.warning(
            "otel-agent-profiler: cannot put the profiler in front of this provider's exporters; "
            "profiling without adding attributes to exported spans"
        )
        provider.add_span_processor(profiler)


class _ExportingViaProfiler(SpanProcessor):
    """Stands on the provider for an exporting processor that now sits behind the profiler.

    The SDK's setup adds one processor per exporter to the provider; this placeholder takes
    that place so spans reach the exporter only through the profiler (enriched, once).
    """

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        pass

    def shutdown(self) -> None:
        pass  # the profiler shuts its downstream processors down

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class AgentProfilerConfigurator(SdkConfigurator):
    """The ``opentelemetry_configurator`` entry point: the SDK's setup, with the profiler.

    Traces and metrics default to the OTLP exporters (as if ``OTEL_TRACES_EXPORTER`` and
    ``OTEL_METRICS_EXPORTER`` were ``otlp``), with the profiler off
    (``OTEL_AGENT_PROFILER_ENABLED=false``) as with it on; everything else is the SDK's own
    configuration.
    """

    def _configure(self, **kwargs: Any) -> None:
        # The defaults hold with the profiler off too: turning it off must leave the app's
        # telemetry as it was with it on, minus the profiler (not turn the export off).
        os.environ.setdefault(OTEL_TRACES_EXPORTER, "otlp")
        os.environ.setdefault(OTEL_METRICS_EXPORTER, "otlp")
        if not enabled_in_environment():
            configure_sdk(self, **kwargs)
            return
        if not _sdk_internals.SDK_SETUP_TAKES_SPAN_PROCESSORS:
            # An SDK before 1.40 adds its exporting processors itself: put the profiler in front of
            # them afterwards, as the hook does behind another configurator.
            configure_sdk(self, **kwargs)
            post_instrument()
            return
        profiler: AgentProfilerSpanProcessor | None = None
        with handle_internal_errors("configurator"):
            profiler = AgentProfilerSpanProcessor()
        if profiler is None:
            # It could not be made (logged by the guard): the SDK's setup without the profiler.
            configure_sdk(self, **kwargs)
            return
        make_exporting: Callable[[SpanExporter], SpanProcessor] = kwargs.get("export_span_processor") or (
            BatchSpanProcessor
        )

        def export_via_profiler(exporter: SpanExporter) -> SpanProcessor:
            profiler.add_downstream(make_exporting(AccountingSpanExporter(exporter)))
            return _ExportingViaProfiler()

        kwargs["span_processors"] = [*(kwargs.get("span_processors") or ()), profiler]
        kwargs["export_span_processor"] = export_via_profiler
        configure_sdk(self, **kwargs)
        _flush_before_providers_shut_down(profiler)


@handle_internal_errors("post_instrument hook")
def post_instrument(*_: Any, **__: Any) -> None:
    """The ``opentelemetry_post_instrument`` hook: wire the profiler in if no one has yet."""
    if not enabled_in_environment():
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return
    _flush_before_providers_shut_down(find_profiler(provider) or install(provider))
