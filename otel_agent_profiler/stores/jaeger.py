"""Jaeger's HTTP query API (the query service, port 16686): a search by service, or traces by id.

``GET /api/traces?service=S&operation=O&tags={json}&start=µs&end=µs&limit=N`` and
``GET /api/traces/{traceID}`` both answer ``{"data": [trace, ...], "errors": ...}`` in the
Jaeger JSON the adapters read (``adapters.jaeger_json``). A search answers whole traces, so it
is one request.

A URL ending in ``/api/v3`` uses the v3 API instead (Jaeger 1.4x and v2):
``GET /api/v3/traces?query.service_name=S&query.start_time_min=RFC3339&...`` and
``GET /api/v3/traces/{id}`` answer ``{"result": {OTLP JSON}}``. Its HTTP gateway takes no tags,
and some versions answer an empty search with a 404.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ..errors import StoreError
from .http import FetchProgress, StoreHttp
from .query import Fetched, StoreQuery

_NS_PER_US = 1000


def _errors_of(answer: Any) -> str:
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if not errors or not isinstance(errors, list):
        return ""
    return "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in errors[:3])


def _traces_of(http: StoreHttp, answer: Any, url: str) -> list[Any]:
    if not isinstance(answer, dict) or "data" not in answer or not isinstance(answer["data"], (list, type(None))):
        raise StoreError(
            f'{http.store} at {http.base_url}: malformed answer from {url}: not Jaeger\'s {{"data": [...]}}'
        )
    errors = _errors_of(answer)
    if errors and not answer.get("data"):
        raise StoreError(f"{http.store} at {http.base_url}: the query failed: {errors}")
    return list(answer.get("data") or [])


def search_params(query: StoreQuery, now_ns: int) -> list[tuple[str, str]]:
    """The query string of a search (``/api/traces``)."""
    start_ns, end_ns = query.window_ns(now_ns)
    params = [("service", query.service or "")]
    if query.operation:
        params.append(("operation", query.operation))
    if query.tags:
        params.append(("tags", json.dumps(dict(query.tags), separators=(",", ":"))))
    params += [
        ("start", str(start_ns // _NS_PER_US)),
        ("end", str(end_ns // _NS_PER_US)),
        ("limit", str(query.limit)),
    ]
    return params


def is_v3(url: str) -> bool:
    """Whether ``url`` names Jaeger's v3 API (it ends in ``/api/v3``)."""
    return url.rstrip("/").endswith("/api/v3")


def _rfc3339(time_ns: int) -> str:
    seconds, ns = divmod(time_ns, 10**9)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns:09d}Z"


def v3_search_params(query: StoreQuery, now_ns: int) -> list[tuple[str, str]]:
    """The query string of a v3 search (``/traces`` under ``/api/v3``); both bounds are required."""
    start_ns, end_ns = query.window_ns(now_ns)
    params = [("query.service_name", query.service or "")]
    if query.operation:
        params.append(("query.operation_name", query.operation))
    return [
        *params,
        ("query.start_time_min", _rfc3339(start_ns)),
        ("query.start_time_max", _rfc3339(end_ns)),
        # The number of traces: num_traces before Jaeger v2, search_depth since.
        ("query.num_traces", str(query.limit)),
        ("query.search_depth", str(query.limit)),
    ]


def _v3_document(http: StoreHttp, answer: Any, path: str) -> Any:
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        raise StoreError(
            f"{http.store} at {http.base_url}: malformed answer from {http.url(path)}: not Jaeger's "
            '{"result": {"resourceSpans": [...]}}'
        )
    result.setdefault("resourceSpans", [])
    return result


def _fetch_by_id(
    http: StoreHttp,
    query: StoreQuery,
    progress: FetchProgress,
    traces_path: str,
    document: Callable[[Any, str], Any],
) -> list[Fetched]:
    """Each of ``query.trace_ids`` from ``{traces_path}/{id}``, the answer made a document by
    ``document(answer, path)``; a trace the store does not have is fetched as None."""
    progress.start("fetching traces", len(query.trace_ids))

    def by_id(trace_id: str) -> Fetched:
        path = f"{traces_path}/{urllib.parse.quote(trace_id, safe='')}"
        answer = http.get_json(path, missing_ok=True)
        progress.advance(detail=trace_id)
        return Fetched(f"{http.store} trace {trace_id}", None if answer is None else document(answer, path))

    return http.map(by_id, query.trace_ids)


def _fetch_v3(http: StoreHttp, query: StoreQuery, progress: FetchProgress) -> list[Fetched]:
    if query.trace_ids:
        return _fetch_by_id(http, query, progress, "/traces", lambda answer, path: _v3_document(http, answer, path))
    progress.start("searching", 1)
    answer = http.get_json("/traces", v3_search_params(query, time.time_ns()), missing_ok=True)
    progress.advance()
    document = {"resourceSpans": []} if answer is None else _v3_document(http, answer, "/traces")
    if not document["resourceSpans"]:
        return []
    return [Fetched(f"{http.store} search {query.describe()}", document)]


def fetch_jaeger(http: StoreHttp, query: StoreQuery, progress: FetchProgress) -> list[Fetched]:
    """The traces fetched, as Jaeger JSON documents, one per trace (v3: OTLP JSON, one per answer)."""
    if is_v3(http.base_url):
        return _fetch_v3(http, query, progress)
    if query.trace_ids:
        return _fetch_by_id(
            http,
            query,
            progress,
            "/api/traces",
            lambda answer, path: {"data": _traces_of(http, answer, http.url(path))},
        )
    progress.start("searching", 1)
    answer = http.get_json("/api/traces", search_params(query, time.time_ns()))
    progress.advance()
    traces = _traces_of(http, answer, http.url("/api/traces"))
    documents = []
    for trace in traces:
        trace_id = trace.get("traceID") if isinstance(trace, dict) else None
        documents.append(Fetched(f"{http.store} trace {trace_id or '?'}", {"data": [trace]}))
    return documents
