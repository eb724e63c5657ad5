"""The inference server's load while the traces ran, read back from the Prometheus that scraped it.

In production vLLM's or SGLang's ``/metrics`` is scraped by Prometheus. For the time the traces
cover, one ``GET /api/v1/query_range`` per metric name reads the server's load series back (the
HTTP API's matrix answer: ``{"status": "success", "data": {"resultType": "matrix", "result":
[{"metric": {labels}, "values": [[unix_s, "value"], ...]}]}}``), turns them into
``core.backend_load.LoadSample``\\ s, one server per ``instance`` label, and attaches the load each
LLM call met (``core.backend_load.attach_backend_load``).

The metrics are those a scrape of the server is read for (``adapters.prometheus_metrics.LOAD_METRICS``):
running and waiting requests, KV-cache use, the prefix-cache query and hit counters (SGLang's
prompt and cached tokens; its ``sglang:cache_hit_rate`` gauge covers only the last prefill batch,
so it is not used here), and preemptions. The scrape's fallbacks for older releases are not read.

Each name is also read with an underscore for its colon (see :func:`query`). Series of one
server that differ in other labels (``model_name``, an engine or data-parallel
rank) are added up in the query, except KV-cache use, where the fullest one counts.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..adapters.prometheus_metrics import LOAD_METRICS, MAX, LoadMetric
from ..core.backend_load import DEFAULT_MAX_GAP_NS, LoadSamples, attach_backend_load
from ..core.categories import LLM
from ..core.profile import LoadSample, TraceProfile
from ..errors import StoreError
from .http import FetchProgress, HttpSettings, LockedProgress, NoProgress, StoreHttp

PROMETHEUS = "Prometheus"
QUERY_RANGE = "/api/v1/query_range"

#: Seconds of metrics read before the first trace starts and after the last one ends, so that
#: a call at the edge has the sample before it and the one after it.
WINDOW_PADDING_NS = 5_000_000_000
#: Points per series and query; Prometheus refuses a query_range of more than 11,000.
MAX_POINTS = 10_000
#: Traces further apart than this are read as separate windows, not one long one.
WINDOW_GAP_NS = 300_000_000_000
#: At most this many windows: the closest ones are merged first.
MAX_WINDOWS = 16

_NS_PER_S = 1_000_000_000
_LABEL_MATCHER = r'[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"'
_MATCHERS = re.compile(rf"\s*{_LABEL_MATCHER}\s*(?:,\s*{_LABEL_MATCHER}\s*)*,?\s*")


def label_matchers(selector: str) -> str:
    """The label matchers of a selector such as ``{job="vllm"}`` (the braces may be left out).

    Raises ``ValueError`` (one line) for anything else, such as a metric name before the braces.
    """
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    if not _MATCHERS.fullmatch(inner):
        raise ValueError(
            f"{selector!r} is not a list of label matchers such as '{{job=\"vllm\"}}' or "
            '\'{instance=~"gpu-.*", namespace="llm"}\''
        )
    return inner.strip().rstrip(",").strip()


def query(name: str, aggregation: str, matchers: str = "") -> str:
    """The PromQL of one metric name: its series per server (``instance``) and model, combined.

    The name matches with its colon or an underscore in its place: prometheus_client (0.26) writes
    ``vllm_num_requests_running`` in the OpenMetrics format that Prometheus asks for first.
    """
    spellings = name.replace(":", "[:_]")
    selector = f'__name__=~"{spellings}"' + (f", {matchers}" if matchers else "")
    return f"{aggregation} by (instance, model_name) ({{{selector}}})"


@dataclass(frozen=True)
class Window:
    """A time range read from Prometheus, and the step of its points.

    Attributes:
        start_ns / end_ns: The range, Unix epoch nanoseconds.
        step_s: Seconds between points: 1, or more for a range longer than :data:`MAX_POINTS` seconds.
    """

    start_ns: int
    end_ns: int
    step_s: int

    @property
    def points(self) -> int:
        """Points per series at most."""
        return (self.end_ns - self.start_ns) // (self.step_s * _NS_PER_S) + 1


def windows_of(
    spans: Iterable[tuple[int, int]],
    *,
    padding_ns: int = WINDOW_PADDING_NS,
    gap_ns: int = WINDOW_GAP_NS,
    max_windows: int = MAX_WINDOWS,
) -> list[Window]:
    """The windows that cover ``spans`` (start and end, ns), each padded by ``padding_ns``.

    Spans closer than ``gap_ns`` share a window; if that leaves more than ``max_windows``, the
    closest windows are merged until it does not.
    """
    ranges: list[list[int]] = []
    for start_ns, end_ns in sorted((start - padding_ns, max(start, end) + padding_ns) for start, end in spans):
        if ranges and start_ns - ranges[-1][1] <= gap_ns:
            ranges[-1][1] = max(ranges[-1][1], end_ns)
        else:
            ranges.append([start_ns, end_ns])
    if len(ranges) > max_windows:
        # Keep the widest gaps as the boundaries between windows.
        gaps = sorted(range(1, len(ranges)), key=lambda i: ranges[i][0] - ranges[i - 1][1], reverse=True)
        boundaries = sorted(gaps[: max_windows - 1])
        merged = []
        first = 0
        for boundary in [*boundaries, len(ranges)]:
            merged.append([ranges[first][0], max(r[1] for r in ranges[first:boundary])])
            first = boundary
        ranges = merged
    windows = []
    for start_ns, end_ns in ranges:
        seconds = math.ceil((end_ns - start_ns) / _NS_PER_S)
        windows.append(Window(start_ns, end_ns, max(1, math.ceil(seconds / (MAX_POINTS - 1)))))
    return windows


@dataclass
class _Series:
    """What the answers said about one server."""

    #: (field, preference of the name) -> time_ns -> value, combined over the server's models.
    values: dict[tuple[str, int], dict[int, float]] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)


def fetch_load_history(
    url: str,
    windows: Sequence[Window],
    *,
    matchers: str = "",
    settings: HttpSettings | None = None,
    progress: FetchProgress | None = None,
) -> LoadSamples:
    """The load samples Prometheus at ``url`` holds for ``windows``, one source per server.

    ``matchers`` (see :func:`label_matchers`) narrow every query. A server with no series is
    absent from the history. Raises :class:`StoreError` (one line) when Prometheus cannot be
    read, refuses a query (``"status": "error"``) or answers something that is not its matrix.
    """
    http = StoreHttp(PROMETHEUS, url, settings if settings is not None else HttpSettings())
    shared = LockedProgress(progress if progress is not None else NoProgress())
    asked = [
        (window, metric, preference, name)
        for window in windows
        for metric in LOAD_METRICS
        for preference, name in enumerate(metric.names)
    ]
    shared.start("reading Prometheus", len(asked))

    def ask(item: tuple[Window, LoadMetric, int, str]) -> list[Any]:
        window, metric, _, name = item
        params = [
            ("query", query(name, metric.aggregation, matchers)),
            ("start", f"{window.start_ns / _NS_PER_S:.3f}"),
            ("end", f"{window.end_ns / _NS_PER_S:.3f}"),
            ("step", f"{window.step_s}s"),
        ]
        answer = http.get_json(QUERY_RANGE, params, json_errors=(400, 422))
        shared.advance(detail=name)
        return _matrix(http, answer)

    servers: dict[str, _Series] = {}
    for (_, metric, preference, _), result in zip(asked, http.map(ask, asked), strict=True):
        for series in result:
            labels = series["metric"]
            source = str(labels.get("instance") or labels.get("job") or http.base_url)
            server = servers.setdefault(source, _Series())
            if labels.get("model_name"):
                server.models.add(str(labels["model_name"]))
            values = server.values.setdefault((metric.field, preference), {})
            for time_ns, value in _points(http, series["values"]):
                previous = values.get(time_ns)
                if previous is None:
                    values[time_ns] = value
                else:
                    values[time_ns] = max(previous, value) if metric.aggregation == MAX else previous + value
    points = sum(window.points for window in windows)
    longest_step_ns = max((window.step_s for window in windows), default=1) * _NS_PER_S
    # _samples gives a server's samples sorted by time, one per time; the last points + 1 are kept,
    # and a server without any is left out.
    by_source: dict[str, tuple[LoadSample, ...]] = {}
    for source, server in servers.items():
        samples = _samples(source, server)
        if samples:
            by_source[source] = tuple(samples[-(points + 1) :])
    return LoadSamples(by_source, max_gap_ns=max(DEFAULT_MAX_GAP_NS, round(2.5 * longest_step_ns)))


def _matrix(http: StoreHttp, answer: Any) -> list[Any]:
    """The ``result`` of a query_range answer, checked; raises :class:`StoreError` otherwise."""
    where = f"{http.store} at {http.base_url}"
    if isinstance(answer, dict) and answer.get("status") == "error":
        kind = answer.get("errorType") or "error"
        raise StoreError(f"{where}: the query failed ({kind}: {' '.join(str(answer.get('error', '')).split())})")
    data = answer.get("data") if isinstance(answer, dict) and answer.get("status") == "success" else None
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if not isinstance(result, list) or not all(
        isinstance(s, dict) and isinstance(s.get("metric"), dict) and isinstance(s.get("values"), list) for s in result
    ):
        raise StoreError(
            f"{where}: malformed answer from {http.url(QUERY_RANGE)}: not a query_range answer "
            '({"status": "success", "data": {"resultType": "matrix", "result": [...]}})'
        )
    return result


def _points(http: StoreHttp, values: list[Any]) -> Iterable[tuple[int, float]]:
    for point in values:
        try:
            time_s, text = point
            value = float(text)
            time_ns = round(float(time_s) * 1000) * 1_000_000  # Prometheus's timestamps are milliseconds
        except (TypeError, ValueError):
            raise StoreError(
                f"{http.store} at {http.base_url}: malformed answer from {http.url(QUERY_RANGE)}: "
                f'a point is not [unix_seconds, "value"]: {str(point)[:60]}'
            ) from None
        if math.isfinite(value):
            yield time_ns, value


def _samples(source: str, server: _Series) -> list[LoadSample]:
    """One sample per time any of the server's series has a point, from the preferred name of each field."""
    chosen: dict[str, dict[int, float]] = {}
    for metric in LOAD_METRICS:
        for preference in range(len(metric.names)):
            values = server.values.get((metric.field, preference))
            if values:
                chosen[metric.field] = values
                break
    times = sorted({time_ns for values in chosen.values() for time_ns in values})
    models = tuple(sorted(server.models))
    return [
        LoadSample(
            time_ns=time_ns,
            source=source,
            models=models,
            **{name: values[time_ns] for name, values in chosen.items() if time_ns in values},
        )
        for time_ns in times
    ]


@dataclass(frozen=True)
class PrometheusLoad:
    """What :func:`attach_prometheus_load` found.

    Attributes:
        windows: The time ranges read (none when there was no LLM call).
        servers: The servers (``instance`` labels) with load series in them.
        llm_calls: The counted LLM calls of the profiles.
        attached: The calls that got a ``backend_load``.
    """

    windows: tuple[Window, ...]
    servers: tuple[str, ...]
    llm_calls: int
    attached: int


def attach_prometheus_load(
    profiles: Sequence[TraceProfile],
    url: str,
    *,
    matchers: str = "",
    settings: HttpSettings | None = None,
    progress: FetchProgress | None = None,
    now_ns: int | None = None,
) -> PrometheusLoad:
    """Read the inference servers' load for the time ``profiles`` cover and attach it to their LLM calls.

    Each counted LLM call gets ``SpanProfile.backend_load`` from the server that serves its model
    (with one server, that one). Traces without LLM calls are not read for. Raises
    :class:`StoreError` (one line) when Prometheus cannot be read.
    """
    with_calls = [p for p in profiles if any(s.category == LLM and s.counted for s in p.spans)]
    calls = sum(1 for p in with_calls for s in p.spans if s.category == LLM and s.counted)
    if not with_calls:
        return PrometheusLoad((), (), 0, 0)
    # Never ask for the future: Prometheus answers it with the last value, over and over.
    limit_ns = now_ns if now_ns is not None else time.time_ns()
    windows = tuple(
        Window(w.start_ns, min(w.end_ns, max(w.start_ns + _NS_PER_S, limit_ns)), w.step_s)
        for w in windows_of((p.start_ns, p.end_ns) for p in with_calls)
    )
    history = fetch_load_history(url, windows, matchers=matchers, settings=settings, progress=progress)
    attached = sum(attach_backend_load(profile, history) for profile in with_calls)
    return PrometheusLoad(windows, tuple(history.sources()), calls, attached)
