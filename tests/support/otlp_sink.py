"""A killable OTLP upstream for the fault tests: run as a process, it records every span id it acknowledges.

    python tests/support/otlp_sink.py --grpc-port P --http-port Q --record FILE

Receives OTLP traces over gRPC (``TraceService/Export``) and OTLP/HTTP protobuf (``POST /v1/traces``;
``/v1/metrics`` is answered 200 and ignored). Before it answers a traces request it appends the hex span
ids of that request to FILE, one per line, and flushes: a span id in FILE was received, and every span
acknowledged is in FILE, even when the process is then killed with SIGKILL (the data is in the kernel's
page cache by then). A request in flight at the kill may be in FILE without having been acknowledged;
the sender retries it, so FILE may hold an id twice. :func:`recorded_span_ids` reads FILE back.

A separate process, not a thread, so that a test can kill it for real and start it again on the same ports.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def recorded_span_ids(path: Path) -> set[bytes]:
    """The span ids the sink (every run of it writing to ``path``) acknowledged; a cut last line is ignored."""
    if not path.exists():
        return set()
    ids = set()
    for line in path.read_text(encoding="ascii").splitlines():
        if len(line) == 16:
            ids.add(bytes.fromhex(line))
    return ids


class _Recorder:
    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self._lock = threading.Lock()

    def record(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest.FromString(body)
        lines = [
            span.span_id.hex() + "\n" for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
        ]
        with self._lock:
            self._file.writelines(lines)
            self._file.flush()


def _http_server(port: int, recorder: _Recorder) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/v1/traces":
                recorder.record(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _grpc_server(port: int, recorder: _Recorder) -> Any:
    from concurrent import futures

    import grpc  # type: ignore[import-untyped]

    def export(body: bytes, context: Any) -> bytes:
        recorder.record(body)
        return b""  # an empty ExportTraceServiceResponse

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},  # bytes in, bytes out
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=[handler])
    if server.add_insecure_port(f"127.0.0.1:{port}") != port:
        raise SystemExit(f"cannot listen on gRPC port {port}")
    server.start()
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True, help="file the acknowledged span ids are appended to")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with args.record.open("a", encoding="ascii") as file:
        recorder = _Recorder(file)
        http = _http_server(args.http_port, recorder)
        grpc_server = _grpc_server(args.grpc_port, recorder)
        print("listening", flush=True)
        stop.wait()
        grpc_server.stop(1).wait()
        http.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
