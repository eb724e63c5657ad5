"""A minimal OTLP/HTTP traces receiver for the demo: where the agent and the inference server both send spans.

The agent's spans and the server's ``llm_request`` spans come from two processes; profiling the
call anatomy needs them in one place. ``python -m demo --server-spans`` points both at this
receiver (``POST /v1/traces``, protobuf, as the OTLP/HTTP exporters send by default), then
profiles what arrived with the same core as every other path.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_agent_profiler.adapters.otlp_proto import records_from_request
from otel_agent_profiler.core.records import SpanRecord

__all__ = ["SpanReceiver"]

_MAX_BODY_BYTES = 64 * 1024 * 1024


class SpanReceiver:
    """Receives OTLP/HTTP protobuf traces on 127.0.0.1 and keeps them as ``SpanRecord`` s."""

    def __init__(self) -> None:
        self._records: list[SpanRecord] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> SpanReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, _MAX_BODY_BYTES))
                if self.path.split("?", 1)[0] == "/v1/traces":
                    receiver._add(ExportTraceServiceRequest.FromString(body))
                data = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="demo-span-receiver", daemon=True).start()
        return self

    def _add(self, request: ExportTraceServiceRequest) -> None:
        problems: list[str] = []
        records = [record for record, *_ in records_from_request(request, problems) if record is not None]
        with self._lock:
            self._records.extend(records)

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL (exporters append ``/v1/traces``)."""
        if self._httpd is None:
            raise RuntimeError("receiver not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def records(self) -> list[SpanRecord]:
        with self._lock:
            return list(self._records)

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> SpanReceiver:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
