"""Counting what reached the exporter and what did not, so a lost collector is reported.

The SDK's batching processor retries and then gives up quietly; wrapping the exporter lets
the profiler say at shutdown how many spans could not be exported, and where to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._sdk_internals import exporter_endpoint

_logger = logging.getLogger("otel_agent_profiler")


def describe_exporter(exporter: SpanExporter) -> str:
    endpoint = exporter_endpoint(exporter)
    name = type(exporter).__name__
    return f"{name} ({endpoint})" if endpoint else name


class AccountingSpanExporter(SpanExporter):
    """Passes spans to ``exporter`` and counts the ones it accepted and the ones it did not."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.exported = 0
        self.failed = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        except Exception:
            # Not an error of ours: the exporter's, counted as not exported and raised on to the
            # batch processor, which handles it as it would without the profiler.
            with self._lock:
                self.failed += len(spans)
            raise
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failed += len(spans)
        return result

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        try:
            self.exporter.shutdown()
        finally:
            if self.failed:
                _logger.warning(
                    "otel-agent-profiler: %d spans could not be exported to %s (%d were exported)",
                    self.failed,
                    describe_exporter(self.exporter),
                    self.exported,
                )
