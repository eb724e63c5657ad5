"""Small real HTTP servers that answer as Jaeger's and Tempo's query APIs do, for the store tests.

Jaeger and Tempo cannot run on this machine: these serve documents shaped exactly as their API
documentation shows them, on a free port, and record every request they are sent.

* Jaeger's HTTP JSON API (the query service, port 16686), "HTTP JSON (internal)" in Jaeger's API
  documentation (https://www.jaegertracing.io/docs/latest/apis/, Jaeger 1.x; Jaeger v2 serves it
  unchanged): ``GET /api/traces?service=&operation=&tags={json}&start=µs&end=µs&limit=`` and
  ``GET /api/traces/{id}`` answer the query service's structured response ``{"data": [trace],
  "total": 0, "limit": 0, "offset": 0, "errors": null}`` (jaeger ``cmd/query/app/http_handler.go``);
  a trace id it does not have is a 404 whose ``errors`` say ``trace not found``. A trace is
  ``{"traceID", "spans": [{"traceID", "spanID", "operationName", "references": [{"refType":
  "CHILD_OF", "traceID", "spanID"}], "startTime": µs, "duration": µs, "tags": [{"key", "type",
  "value"}], "logs": [{"timestamp": µs, "fields": [...]}], "processID"}], "processes": {"p1":
  {"serviceName", "tags"}}, "warnings": null}`` (jaeger ``model/json/model.go``).
* Jaeger's v3 HTTP API (same port, under ``/api/v3``; jaeger ``cmd/query/app/apiv3/http_gateway.go``
  and its snapshot ``snapshots/FindTraces.json``): ``GET /api/v3/traces?query.service_name=&
  query.start_time_min=RFC3339&query.start_time_max=RFC3339&query.num_traces=`` and ``GET
  /api/v3/traces/{id}`` answer ``{"result": {"resourceSpans": [...]}}`` (OTLP JSON, hex ids); a
  missing trace, and in some versions an empty search, is a 404 with ``{"error": {"httpCode": 404,
  "message": ...}}``.
* Grafana Tempo's HTTP API (port 3200), https://grafana.com/docs/tempo/latest/api_docs/ (Tempo 2.x):
  ``GET /api/search?q=&start=s&end=s&limit=`` answers ``{"traces": [{"traceID", "rootServiceName",
  "rootTraceName", "startTimeUnixNano", "durationMs"}], "metrics": {"inspectedBytes", ...}}``, trace
  ids written without their leading zeros; ``GET /api/v2/traces/{id}`` answers ``{"trace":
  {"resourceSpans": [...]}}`` and ``GET /api/traces/{id}`` (Accept: application/json)
  ``{"batches": [...]}``, OTLP JSON whose ids Tempo's protobuf JSON marshaller writes in base64;
  a missing trace is a 404. Tempo before 2.5 has no v2 endpoint (a 404 for every id).
"""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agent_profiler.core.records import SpanKind, SpanRecord, StatusCode

HOST = "127.0.0.1"


@dataclass
class Answer:
    status: int = 200
    body: Any = None  # JSON-encoded unless bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Request:
    path: str
    params: dict[str, list[str]]
    headers: dict[str, str]


Route = Callable[[Request], Answer]


class StoreServer:
    """A real HTTP server on a free port; ``routes`` maps a path (or a path prefix ending in ``/``) to an answer."""

    def __init__(self, routes: Mapping[str, Route | Answer | Sequence[Answer]]) -> None:
        self.routes = dict(routes)
        self.requests: list[Request] = []
        self._served: dict[str, int] = {}
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                request = Request(parts.path, urllib.parse.parse_qs(parts.query), dict(self.headers.items()))
                owner.requests.append(request)
                answer = owner._answer(request)
                if answer.delay_s:
                    threading.Event().wait(answer.delay_s)
                body = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _answer(self, request: Request) -> Answer:
        route = self.routes.get(request.path)
        if route is None:
            prefixes = [p for p in self.routes if p.endswith("/") and request.path.startswith(p)]
            route = self.routes[max(prefixes, key=len)] if prefixes else Answer(404, {"error": "no route"})
        if isinstance(route, Answer):
            return route
        if isinstance(route, Sequence):
            served = self._served.get(request.path, 0)
            self._served[request.path] = served + 1
            return route[min(served, len(route) - 1)]
        return route(request)

    def __enter__(self) -> StoreServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


def closed_port_url() -> str:
    """The URL of a port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    return f"http://{HOST}:{port}"


# Jaeger JSON, as the query service answers it.


def _jaeger_tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    # Jaeger stores arrays and maps as JSON strings.
    return {"key": key, "type": "string", "value": json.dumps(value)}


def jaeger_trace(records: Iterable[SpanRecord]) -> dict[str, Any]:
    """One trace of records in Jaeger JSON, as the OpenTelemetry-to-Jaeger translation writes it."""
    records = list(records)
    processes: dict[str, dict[str, Any]] = {}
    process_of: dict[int, str] = {}
    spans = []
    for record in records:
        if id(record.resource) not in process_of:
            key = f"p{len(process_of) + 1}"
            process_of[id(record.resource)] = key
            resource = dict(record.resource)
            service = resource.pop("service.name", "unknown")
            processes[key] = {"serviceName": service, "tags": [_jaeger_tag(k, v) for k, v in resource.items()]}
        tags = [_jaeger_tag(k, v) for k, v in record.attributes.items()]
        if record.kind is not SpanKind.INTERNAL:
            tags.append(_jaeger_tag("span.kind", record.kind.value.lower()))
        if record.status is not StatusCode.UNSET:
            tags.append(_jaeger_tag("otel.status_code", record.status.value))
        references = []
        if record.parent_span_id:
            references.append({"refType": "CHILD_OF", "traceID": record.trace_id, "spanID": record.parent_span_id})
        end_ns = record.end_ns if record.end_ns is not None else record.start_ns
        spans.append(
            {
                "traceID": record.trace_id,
                "spanID": record.span_id,
                "operationName": record.name,
                "references": references,
                "startTime": record.start_ns // 1000,
                "duration": (end_ns - record.start_ns) // 1000,
                "tags": tags,
                "logs": [
                    {
                        "timestamp": event.time_ns // 1000,
                        "fields": [_jaeger_tag("event", event.name)]
                        + [_jaeger_tag(k, v) for k, v in event.attributes.items()],
                    }
                    for event in record.events
                ],
                "processID": process_of[id(record.resource)],
                "warnings": None,
            }
        )
    return {"traceID": records[0].trace_id, "spans": spans, "processes": processes, "warnings": None}


def jaeger_answer(traces: list[dict[str, Any]]) -> dict[str, Any]:
    return {"data": traces, "total": 0, "limit": 0, "offset": 0, "errors": None}


JAEGER_NOT_FOUND = Answer(
    404, {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": 404, "msg": "trace not found"}]}
)


# Tempo's answers.


def base64_ids(document: dict[str, Any]) -> dict[str, Any]:
    """An OTLP JSON document with its ids in base64, as Tempo's protobuf JSON marshaller writes them."""
    copy = json.loads(json.dumps(document))

    def encode(holder: dict[str, Any], key: str) -> None:
        if holder.get(key):
            holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode()

    for resource_spans in copy["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    encode(span, key)
    return copy


def tempo_search_answer(trace_ids: Iterable[str]) -> dict[str, Any]:
    return {
        "traces": [
            {
                # Tempo writes trace ids without their leading zeros.
                "traceID": trace_id.lstrip("0"),
                "rootServiceName": "research-agent-demo",
                "rootTraceName": "invoke_agent research_agent",
                "startTimeUnixNano": "1795554442000000000",
                "durationMs": 1200,
            }
            for trace_id in trace_ids
        ],
        "metrics": {"inspectedBytes": "4096", "completedJobs": 1, "totalJobs": 1},
    }
