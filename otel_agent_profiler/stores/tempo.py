"""Grafana Tempo's HTTP API (port 3200): a TraceQL search, then each trace by id.

``GET /api/search?q={TraceQL}&start=s&end=s&limit=N`` answers ``{"traces": [{"traceID", ...}]}``
(ids may lack their leading zeros); ``GET /api/v2/traces/{id}`` answers ``{"trace": {OTLP JSON}}``
and the older ``GET /api/traces/{id}`` ``{"batches": [...]}``, both read by ``adapters.otlp_json``.
A Tempo without the v2 endpoint is asked the v1 one instead.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from typing import Any

from ..errors import StoreError
from .http import FetchProgress, StoreHttp
from .query import Fetched, StoreQuery

_NS_PER_S = 10**9


def search_params(query: StoreQuery, now_ns: int) -> list[tuple[str, str]]:
    """The query string of a search (``/api/search``); Tempo's bounds are whole seconds."""
    start_ns, end_ns = query.window_ns(now_ns)
    return [
        ("q", query.traceql or "{}"),
        ("start", str(start_ns // _NS_PER_S)),
        # Rounded up, so that a trace in the last second is still inside.
        ("end", str(-(-end_ns // _NS_PER_S))),
        ("limit", str(query.limit)),
    ]


def full_trace_id(raw: str) -> str:
    """A trace id as 32 hex digits: Tempo's search drops leading zeros."""
    return raw.strip().lower().rjust(32, "0")


class _TraceById:
    """Trace by id: v2 first; after a Tempo answered a 404 there but a trace on v1, only v1."""

    def __init__(self, http: StoreHttp, progress: FetchProgress) -> None:
        self.http = http
        self.progress = progress
        self._v1_only = False
        self._lock = threading.Lock()

    def __call__(self, trace_id: str) -> Fetched:
        name = f"{self.http.store} trace {trace_id}"
        quoted = urllib.parse.quote(trace_id, safe="")
        document = None
        if not self._v1_only:
            answer = self.http.get_json(f"/api/v2/traces/{quoted}", missing_ok=True)
            if answer is not None:
                document = self._unwrap(answer, f"/api/v2/traces/{quoted}", "trace")
                document.setdefault("resourceSpans", [])
        if document is None:
            answer = self.http.get_json(f"/api/traces/{quoted}", missing_ok=True)
            if answer is not None:
                document = {"resourceSpans": self._unwrap(answer, f"/api/traces/{quoted}", "batches")}
                with self._lock:
                    self._v1_only = True
        self.progress.advance(detail=trace_id)
        return Fetched(name, document)

    def _unwrap(self, answer: Any, path: str, key: str) -> Any:
        """``answer[key]``: v2's ``trace`` object or v1's ``batches`` list (Tempo leaves out an empty one)."""
        expected: type = dict if key == "trace" else list
        inner = answer.get(key, expected()) if isinstance(answer, dict) else None
        if not isinstance(inner, expected):
            raise StoreError(
                f"{self.http.store} at {self.http.base_url}: malformed answer from {self.http.url(path)}: "
                f"no {key!r} {'object' if expected is dict else 'list'}"
            )
        return inner


def fetch_tempo(http: StoreHttp, query: StoreQuery, progress: FetchProgress) -> list[Fetched]:
    """The traces fetched, as OTLP JSON documents, one per trace."""
    trace_ids = [full_trace_id(trace_id) for trace_id in query.trace_ids]
    if not trace_ids:
        progress.start("searching", 1)
        answer = http.get_json("/api/search", search_params(query, time.time_ns()))
        progress.advance()
        found = answer.get("traces") if isinstance(answer, dict) else None
        if found is None and isinstance(answer, dict):
            found = []  # Tempo leaves out an empty list
        if not isinstance(found, list) or not all(isinstance(t, dict) and "traceID" in t for t in found):
            raise StoreError(
                f"{http.store} at {http.base_url}: malformed answer from {http.url('/api/search')}: "
                'not Tempo\'s {"traces": [{"traceID": ...}]}'
            )
        trace_ids = list(dict.fromkeys(full_trace_id(str(t["traceID"])) for t in found))[: query.limit]
    progress.start("fetching traces", len(trace_ids))
    return http.map(_TraceById(http, progress), trace_ids)
