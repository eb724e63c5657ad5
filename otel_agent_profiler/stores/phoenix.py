"""Arize Phoenix's REST API: the spans of a project, paged, turned into OTLP JSON.

``GET /v1/projects/{project}/spans`` answers ``{"data": [span, ...], "next_cursor": ...}`` (up to
1000 spans a page; the cursor asks for the next). Two steps: the root spans of the time window
(``parent_id=null``) name the traces, then every span of those traces is fetched by trace id, so
that no trace is cut at the window's end.

Phoenix keeps names, ids, parents, times (to the microsecond), status, attributes and events. It
drops the OpenTelemetry span kind and the resource, and moves ``openinference.span.kind`` out of
the attributes into ``span_kind``: it is put back here (when Phoenix knows it), since the
categories read it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from ..adapters.otlp_json_out import attributes_json
from ..errors import StoreError
from .http import FetchProgress, StoreHttp
from .query import Fetched, StoreQuery

#: Spans per page: the most Phoenix gives.
PAGE_SIZE = 1000
#: Trace ids asked for in one request.
TRACES_PER_REQUEST = 50

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_STATUS_NAMES = {"OK": "STATUS_CODE_OK", "ERROR": "STATUS_CODE_ERROR"}


def time_ns(text: Any, what: str) -> int:
    """Phoenix's ISO 8601 time (microseconds, an offset) in ns since the epoch, exactly."""
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what} is not an ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1000


def _iso(time_ns_: int) -> str:
    # Exact to the microsecond (Phoenix's precision), without a float on the way.
    return (_EPOCH + timedelta(microseconds=time_ns_ // 1000)).isoformat()


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    if not attributes:
        return []
    if not isinstance(attributes, Mapping):
        raise ValueError("attributes are not an object")
    return attributes_json(attributes)


def otlp_span(span: Mapping[str, Any]) -> dict[str, Any]:
    """One Phoenix span as an OTLP JSON span. Raises ``ValueError``, ``TypeError`` or ``KeyError`` if malformed."""
    context = span["context"]
    attributes = dict(span.get("attributes") or {})
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind and kind != "UNKNOWN":
        attributes.setdefault("openinference.span.kind", kind)
    out: dict[str, Any] = {
        "traceId": context["trace_id"],
        "spanId": context["span_id"],
        "name": span.get("name", ""),
        "startTimeUnixNano": str(time_ns(span["start_time"], "start_time")),
        "endTimeUnixNano": str(time_ns(span["end_time"], "end_time")) if span.get("end_time") else "0",
        "attributes": _attributes(attributes),
        "status": {
            "code": _STATUS_NAMES.get(str(span.get("status_code")), "STATUS_CODE_UNSET"),
            "message": span.get("status_message") or "",
        },
    }
    if span.get("parent_id"):
        out["parentSpanId"] = span["parent_id"]
    events = span.get("events") or []
    if events:
        out["events"] = [
            {
                "name": event.get("name", ""),
                "timeUnixNano": str(time_ns(event["timestamp"], "an event's timestamp")),
                "attributes": _attributes(event.get("attributes")),
            }
            for event in events
        ]
    return out


class _Pages:
    """Every span a query of the spans endpoint matches, page after page."""

    def __init__(self, http: StoreHttp, query: StoreQuery, progress: FetchProgress) -> None:
        self.http = http
        self.path = f"/v1/projects/{urllib.parse.quote(query.project or '', safe='')}/spans"
        self.project = query.project
        self.progress = progress

    def __call__(self, params: list[tuple[str, str]]) -> Iterator[Any]:
        cursor: str | None = None
        while True:
            page = [*params, ("limit", str(PAGE_SIZE))] + ([("cursor", cursor)] if cursor else [])
            answer = self.http.get_json(self.path, page, missing_ok=True)
            if answer is None:
                raise StoreError(f"{self.http.store} at {self.http.base_url}: no project {self.project!r}")
            data = answer.get("data") if isinstance(answer, dict) else None
            if not isinstance(data, list):
                raise StoreError(
                    f"{self.http.store} at {self.http.base_url}: malformed answer from {self.http.url(self.path)}: "
                    'not Phoenix\'s {"data": [...], "next_cursor": ...}'
                )
            self.progress.advance()
            yield from data
            cursor = answer.get("next_cursor")
            if not cursor:
                return


def _trace_ids_of_roots(pages: _Pages, query: StoreQuery) -> list[str]:
    params = [("parent_id", "null")]
    if query.start_ns is not None:
        params.append(("start_time", _iso(query.start_ns)))
    if query.end_ns is not None:
        params.append(("end_time", _iso(query.end_ns)))
    trace_ids: dict[str, None] = {}
    for span in pages(params):
        trace_id = span.get("context", {}).get("trace_id") if isinstance(span, dict) else None
        if isinstance(trace_id, str):
            trace_ids[trace_id.lower()] = None
        if len(trace_ids) >= query.limit:
            break
    return list(trace_ids)


def fetch_phoenix(http: StoreHttp, query: StoreQuery, progress: FetchProgress) -> list[Fetched]:
    """The traces fetched, as OTLP JSON documents, one per trace."""
    pages = _Pages(http, query, progress)
    if query.trace_ids:
        # Phoenix keeps ids as 32 hex digits.
        trace_ids = [trace_id.lower().rjust(32, "0") for trace_id in query.trace_ids]
    else:
        progress.start("searching", 0)
        trace_ids = _trace_ids_of_roots(pages, query)
    batches = [trace_ids[i : i + TRACES_PER_REQUEST] for i in range(0, len(trace_ids), TRACES_PER_REQUEST)]
    progress.start("fetching spans", 0)
    spans_by_trace: dict[str, list[Any]] = {trace_id: [] for trace_id in trace_ids}
    for spans in http.map(lambda batch: list(pages([("trace_id", t) for t in batch])), batches):
        for span in spans:
            trace_id = span.get("context", {}).get("trace_id") if isinstance(span, dict) else None
            spans_by_trace.setdefault(str(trace_id).lower(), []).append(span)
    return [_document(http, trace_id, spans) for trace_id, spans in spans_by_trace.items()]


def _document(http: StoreHttp, trace_id: str, spans: list[Any]) -> Fetched:
    name = f"{http.store} trace {trace_id}"
    if not spans:
        return Fetched(name, None)
    converted: list[dict[str, Any]] = []
    problems: list[str] = []
    for i, span in enumerate(spans):
        try:
            converted.append(otlp_span(span))
        except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
            problems.append(f"spans[{i}]: malformed span ({exc!s})")
    # Phoenix keeps no resource, nor the instrumentation scope.
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": converted}]}]}
    return Fetched(name, document, problems)
