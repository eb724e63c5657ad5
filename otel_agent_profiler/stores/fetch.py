"""Fetching a :class:`StoreQuery` from its store, read as trace files are read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..adapters.files import TraceFile, read_trace_document
from ..adapters.otlp_json_out import otlp_json_document
from ..errors import StoreError
from .http import FetchProgress, HttpSettings, LockedProgress, NoProgress, StoreHttp
from .jaeger import fetch_jaeger
from .phoenix import fetch_phoenix
from .query import JAEGER, PHOENIX, TEMPO, Fetched, StoreQuery
from .tempo import fetch_tempo

_FETCHERS: dict[str, Callable[[StoreHttp, StoreQuery, FetchProgress], list[Fetched]]] = {
    JAEGER: fetch_jaeger,
    TEMPO: fetch_tempo,
    PHOENIX: fetch_phoenix,
}


def fetch_traces(
    query: StoreQuery,
    settings: HttpSettings | None = None,
    progress: FetchProgress | None = None,
    *,
    allow_empty: bool = False,
) -> list[TraceFile]:
    """The traces ``query`` names, one :class:`TraceFile` each, named ``<store> trace <id>``.

    A trace id the store does not have, or an answer only partly readable, is a trace file with
    problems (its error line says what), as an unreadable file is. Raises :class:`StoreError`
    (one line) when the store cannot be read at all, and when a search finds nothing unless
    ``allow_empty``.
    """
    http = StoreHttp(query.store, query.url, settings if settings is not None else HttpSettings())
    shared = LockedProgress(progress if progress is not None else NoProgress())
    fetched = _FETCHERS[query.store](http, query, shared)
    if not fetched and not allow_empty:
        raise StoreError(
            f"{query.store} at {http.base_url}: no traces found for {query.describe()} (--allow-empty: not an error)"
        )
    trace_files = []
    for answer in fetched:
        if answer.document is None:
            trace_files.append(TraceFile(path=answer.name, format=None, problems=[f"not found in {query.store}"]))
            continue
        trace_file = read_trace_document(answer.document, answer.name)
        trace_file.problems.extend(answer.problems)
        trace_files.append(trace_file)
    return trace_files


def saved_document(trace_files: Sequence[TraceFile]) -> dict[str, Any]:
    """The spans of ``trace_files`` as one OTLP JSON document (what ``--save`` writes)."""
    return otlp_json_document(record for trace_file in trace_files for record in trace_file.records)
