"""The three OTLP signals as the service sees them: where they arrive, how they decode, what they count.

Traces are profiled; metrics and logs are passed through to the upstream unchanged. Each
``Signal`` names its OTLP/HTTP path, its gRPC service, its request and response messages, the
field that holds its resources (to merge requests), and how to count its items (spans, metric
data points, log records) and to decode its OTLP/JSON form.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ..adapters.otlp_proto import request_from_otlp_json
from ..errors import SpanDataError
from .spans import span_count

#: OTLP/JSON keys whose values are ids written as hex (protobuf's JSON mapping expects base64).
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids_to_base64(node: Any) -> None:
    """Rewrite every hex id below ``node`` (spans, links, log records, exemplars) as base64, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str) and value:
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise SpanDataError(f"{key} {value[:40]!r} is not hex") from None
            else:
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)


def _from_json(message_class: type[Any]) -> Callable[[bytes], Any]:
    def decode(body: bytes) -> Any:
        try:
            document = json.loads(body)
            if not isinstance(document, dict):
                raise SpanDataError("the body is not a JSON object")
            _hex_ids_to_base64(document)
            message = message_class()
            json_format.ParseDict(document, message, ignore_unknown_fields=True)
        except RecursionError:
            raise SpanDataError("the body is nested too deeply") from None
        except (json_format.ParseError, binascii.Error) as exc:
            raise SpanDataError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        return message

    return decode


def data_point_count(request: ExportMetricsServiceRequest) -> int:
    """The data points of every metric in ``request``, whatever its kind (gauge, sum, histogram, ...)."""
    count = 0
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind is not None:
                    count += len(getattr(metric, kind).data_points)
    return count


def log_record_count(request: ExportLogsServiceRequest) -> int:
    return sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)


@dataclass(frozen=True)
class Signal:
    """One OTLP signal: its name, paths, messages, and how its items are counted and decoded."""

    name: str
    #: What one item is called in logs and counts: span, data point, log record.
    item: str
    http_path: str
    grpc_service: str
    request_class: type[Any]
    response_class: type[Any]
    #: The repeated field of the request holding its resources: requests merge by extending it.
    resources_field: str
    count: Callable[[Any], int]
    from_json: Callable[[bytes], Any]


TRACES = Signal(
    "traces",
    "span",
    "/v1/traces",
    "opentelemetry.proto.collector.trace.v1.TraceService",
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
    "resource_spans",
    span_count,
    request_from_otlp_json,
)
METRICS = Signal(
    "metrics",
    "data point",
    "/v1/metrics",
    "opentelemetry.proto.collector.metrics.v1.MetricsService",
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
    "resource_metrics",
    data_point_count,
    _from_json(ExportMetricsServiceRequest),
)
LOGS = Signal(
    "logs",
    "log record",
    "/v1/logs",
    "opentelemetry.proto.collector.logs.v1.LogsService",
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
    "resource_logs",
    log_record_count,
    _from_json(ExportLogsServiceRequest),
)
SIGNALS = (TRACES, METRICS, LOGS)
