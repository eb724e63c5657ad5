"""The report's summary JSON (``report --summary-json PATH``): every number the report shows, machine-readable.

::

    {
      "format": "otel-agent-profiler.report-summary",   # and "version": 2
      "generator": "otel-agent-profiler <version>",
      "selected_trace_id": "<hex>",                    # the trace the views open with
      "files": [{"path", "format", "spans", "problems"}],
      "totals": {"traces", "llm_calls", "tokens": {...}, "cost_usd",   # every LLM call counted once:
                 "split_llm_calls", "split_tokens": {...}},         # split copies left out, and theirs
      "split_llm_calls": [SplitLLMCall.to_dict(), ...],  # LLM-only traces repeating an agent trace's call
      "traces": [                                       # slowest first, as in the report's table
        {<core schema: schema.trace_to_dict>, "findings": [Finding.to_dict(), ...],
         "combined_projection": CombinedProjection.to_dict() or null}
        # "spans" only for the traces the page shows in detail; every span: analyze --format json
      ],
      "statistics": null | {                            # null with fewer than two traces
        "categories":  [records of analytics.category_statistics (metrics duration_ms,
                        self_time_ms, critical_path_ms; one row per category and metric)],
        "operations":  [records of analytics.operation_statistics, same metrics],
        "throughput":  {"window_start", "window_end" (ISO 8601, UTC),
                        "rows": [records of analytics.throughput(operations=True)]},
        "concurrency": [records of analytics.concurrency_distribution, scope "overall"],
        "concurrency_spikes": {
          "threshold": <calls at once>, "threshold_source": "option" | "p95",
          "overall": <spikes>, "trace": <spikes>       # across runs; within each run
        },
        "sequences":   [records of analytics.frequent_sequences(collapse_repeats=True), top 10],
        "ngrams":      [records of analytics.frequent_ngrams(n=3), top 10],
        "forecasts":   null | {"features": [...], "evaluation": [records of Forecaster.evaluation:
                        target, model_mae, mean_mae, used ("linear" or "mean"), folds, runs, cuts],
                        "means": {target: mean}, "coefficients": {target: {"intercept", feature...}}}
      },
      "prefix_cache_candidates": null | [PrefixCandidate.to_dict(), ...]   # only with --prefix-cache
      "backend_load": null | [                         # null when no call has its server's load
        {"source", "model", "calls", "running_mean", "waiting_p50", "waiting_max", "kv_cache_usage_max",
         "prefix_cache_hit_rate", "preemptions"}       # per server and model, across the traces
      ]
    }

``backend_load`` sums up what the LLM calls met on their inference servers (``core.backend_load``):
``waiting_p50``/``waiting_max`` over the calls' highest waiting requests, ``running_mean`` the mean
of their mean running requests, the hit rate weighted by the calls' durations, preemptions added up.

``<spikes>`` is ``{"count", "total_ms", "max_peak", "spikes": [...], "truncated"}``: the spikes
with the highest peak (then the longest) first, at most 20, each with scope, trace_id, calls (the
categories counted, e.g. ``llm+tool``), start, end, duration_ms, peak, call_count and ``involved``:
its first 10 calls (``span_id``, ``name``, ``trace_id``, in order of start; ``calls_truncated``
says whether there were more). A run of many
traces has thousands of spikes involving thousands of calls; the counts stay exact, the lists
are bounded. The default threshold is the time-weighted 95th percentile of the overall
concurrency of busy time: the level the calls exceed less than 5% of the time any call runs.

Times are float milliseconds as in the core schema, except a finding's ``saving_ns`` and its
evidence (nanoseconds, as ``Finding.to_dict`` writes them); missing statistics (NaN) are ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, TypedDict

from typing_extensions import Unpack

from .._version import __version__
from ..core.backend_load import summarize_loads
from ..core.findings import DEFAULT_CONTEXT_WINDOWS, Finding, combined_projection
from ..core.percentiles import percentile
from ..core.profile import SpanProfile, TraceProfile
from ..core.projection import RecordedSchedule
from ..core.schema import trace_to_dict
from ..core.split_traces import cross_trace_totals, find_split_llm_calls
from .html import by_duration, select_trace
from .json_stream import Encoded, encode_compact as _encode, write_compact_document
from .span_json import trace_document

SUMMARY_FORMAT = "otel-agent-profiler.report-summary"
SUMMARY_VERSION = 2

STAT_METRICS = ("duration_ms", "self_time_ms", "critical_path_ms")
#: The span table's columns the statistics read: the page's charts, and the summary's additions
#: (spikes name their calls, forecasts read tokens). A table of these alone takes about a third
#: of the whole table's time and memory; a test checks that the statistics are the same as from
#: the whole table.
CHART_COLUMNS = (
    "trace_id",
    "span_id",
    "category",
    "operation",
    "start",
    "duration_ms",
    "self_time_ms",
    "critical_path_ms",
    "counted",
)
STATISTICS_COLUMNS = (*CHART_COLUMNS, "name", "total_tokens")
#: Spikes listed per scope, and calls listed per spike (the counts are always complete).
MAX_SPIKES = 20
MAX_SPIKE_CALLS = 10
#: The default spike threshold: the level exceeded during less than this share of busy time.
SPIKE_BUSY_SHARE = 0.05


def clean(value: Any) -> Any:
    """A pandas/numpy cell as a plain JSON value (NaN, NA and NaT as None, timestamps as ISO 8601)."""
    if value is None:
        return None
    if isinstance(value, float):  # numpy's float64 too
        return None if math.isnan(value) else value
    if isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, (tuple, list)):
        return [clean(item) for item in value]
    import pandas as pd

    if pd.isna(value):
        return None
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    if hasattr(value, "item"):  # other numpy scalars
        return clean(value.item())
    return str(value)


def records(frame: Any) -> list[dict[str, Any]]:
    columns = [str(c) for c in frame.columns]
    return [
        {column: clean(value) for column, value in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]


def cross_run_statistics(
    profiles: Sequence[TraceProfile], *, spike_threshold: int | None = None, charts_only: bool = False
) -> dict[str, Any] | None:
    """The ``statistics`` of the summary (see the module docs); None for fewer than 2 traces.

    ``charts_only`` leaves out throughput, spikes and forecasts, which the HTML page does not draw.
    Needs pandas (imported here, so the rest of the command line does not pay for it).
    """
    if len(profiles) < 2:
        return None
    from ..analytics import span_table

    table = span_table(profiles, columns=CHART_COLUMNS if charts_only else STATISTICS_COLUMNS)
    return table_statistics(table, spike_threshold=spike_threshold, charts_only=charts_only)


def table_statistics(table: Any, *, spike_threshold: int | None = None, charts_only: bool = False) -> dict[str, Any]:
    """``cross_run_statistics`` of a span table (of at least ``CHART_COLUMNS`` or ``STATISTICS_COLUMNS``)."""
    from ..analytics import (
        category_statistics,
        concurrency_distribution,
        frequent_ngrams,
        frequent_sequences,
        operation_statistics,
    )

    distribution = concurrency_distribution(table, scopes=("overall",))
    statistics: dict[str, Any] = {
        "categories": records(category_statistics(table, metrics=STAT_METRICS)),
        "operations": records(operation_statistics(table, metrics=STAT_METRICS)),
        "concurrency": records(distribution),
        "sequences": records(frequent_sequences(table, collapse_repeats=True, top=10)),
        "ngrams": records(frequent_ngrams(table, n=3, top=10)),
    }
    if not charts_only:
        statistics["throughput"] = _throughput(table)
        statistics["concurrency_spikes"] = _spikes(table, distribution, spike_threshold)
        statistics["forecasts"] = _forecasts(table)
    return statistics


def _throughput(table: Any) -> dict[str, Any]:
    from ..analytics import throughput

    frame = throughput(table, operations=True)
    return {
        "window_start": clean(frame.attrs.get("window_start")),
        "window_end": clean(frame.attrs.get("window_end")),
        "rows": records(frame),
    }


def default_spike_threshold(distribution: Any) -> int | None:
    """The level the calls exceed during less than ``SPIKE_BUSY_SHARE`` of the busy time (None when never busy)."""
    busy = distribution[distribution["level"] > 0].sort_values("level")
    total = float(busy["time_ms"].sum())
    if total <= 0:
        return None
    above = total
    for level, time_ms in zip(busy["level"], busy["time_ms"], strict=True):
        above -= float(time_ms)
        if above <= SPIKE_BUSY_SHARE * total:
            return int(level)
    return int(busy["level"].max())  # pragma: no cover - the loop always ends at the top level


def _spikes(table: Any, distribution: Any, threshold: int | None) -> dict[str, Any]:
    from ..analytics import concurrency_spikes

    source = "option"
    if threshold is None:
        source = "p95"
        threshold = default_spike_threshold(distribution)
    result: dict[str, Any] = {"threshold": threshold, "threshold_source": source}
    for scope in ("overall", "trace"):
        frame = concurrency_spikes(table, threshold, scope=scope) if threshold is not None else None
        result[scope] = _bounded_spikes(frame)
    return result


def _bounded_spikes(frame: Any) -> dict[str, Any]:
    if frame is None or not len(frame):
        return {"count": 0, "total_ms": 0.0, "max_peak": None, "spikes": [], "truncated": False}
    top = frame.sort_values(["peak", "duration_ms", "start"], ascending=[False, False, True], kind="stable")
    listed = []
    for row in top.head(MAX_SPIKES).itertuples(index=False):
        calls = [
            {"span_id": span_id, "name": name, "trace_id": trace_id}
            for span_id, name, trace_id in list(zip(row.span_ids, row.names, row.trace_ids, strict=True))[
                :MAX_SPIKE_CALLS
            ]
        ]
        listed.append(
            {
                "scope": clean(row.scope),
                "trace_id": clean(row.trace_id),
                "calls": clean(row.calls),
                "start": clean(row.start),
                "end": clean(row.end),
                "duration_ms": clean(row.duration_ms),
                "peak": clean(row.peak),
                "call_count": clean(row.call_count),
                "involved": calls,
                "calls_truncated": int(row.call_count) > MAX_SPIKE_CALLS,
            }
        )
    return {
        "count": len(frame),
        "total_ms": float(frame["duration_ms"].sum()),
        "max_peak": int(frame["peak"].max()),
        "spikes": listed,
        "truncated": len(frame) > MAX_SPIKES,
    }


def _forecasts(table: Any) -> dict[str, Any] | None:
    from ..analytics import fit_forecaster

    try:
        forecaster = fit_forecaster(table)
    except ValueError:  # fewer than two finished runs with steps
        return None
    coefficients = forecaster.coefficients
    return {
        "features": list(forecaster.features),
        "evaluation": records(forecaster.evaluation),
        "means": {target: clean(mean) for target, mean in forecaster.means.items()},
        "coefficients": {
            str(target): {str(k): clean(v) for k, v in row.items()} for target, row in coefficients.iterrows()
        },
    }


class SummaryOptions(TypedDict, total=False):
    """What :func:`build_summary` and :func:`write_summary` take beside the profiles and findings."""

    #: The trace the report opens with (default: the slowest).
    selected_trace_id: str | None
    statistics: Mapping[str, Any] | None
    #: The files read, as the JSON outputs list them.
    files: Sequence[Mapping[str, Any]]
    #: The traces whose spans are included (all when None).
    detail_trace_ids: Collection[str] | None
    #: The prompt-prefix candidates, when they were asked for.
    prefix_cache: Sequence[Any] | None
    #: Context windows by model (default ``DEFAULT_CONTEXT_WINDOWS``), for each call's window use.
    context_windows: Mapping[str, int]
    #: For :func:`write_summary`: traces' documents already encoded (by :func:`encoded_trace`, in
    #: worker processes), by trace id; the others are built and encoded as they are written.
    encoded_traces: Mapping[str, bytes]


def build_summary(
    profiles: Sequence[TraceProfile],
    findings: Mapping[str, Sequence[Finding]],
    **options: Unpack[SummaryOptions],
) -> dict[str, Any]:
    """The summary JSON document (see the module docs); ``options``: see :class:`SummaryOptions`."""
    return _summary(profiles, findings, options, lazy=False)


def write_summary(
    out: BinaryIO,
    profiles: Sequence[TraceProfile],
    findings: Mapping[str, Sequence[Finding]],
    **options: Unpack[SummaryOptions],
) -> None:
    """Write :func:`build_summary`'s document to ``out`` as compact JSON and a newline, a trace at a time.

    The bytes are those of ``msgspec.json.encode(build_summary(...))``; the traces' dicts are
    built one at a time as they are written, never all at once.
    """
    write_compact_document(out, _summary(profiles, findings, options, lazy=True), "traces")


def _summary(
    profiles: Sequence[TraceProfile],
    findings: Mapping[str, Sequence[Finding]],
    options: SummaryOptions,
    *,
    lazy: bool,
) -> dict[str, Any]:
    selected = select_trace(profiles, options.get("selected_trace_id")) if profiles else None
    traces: Iterator[Any] = _trace_documents(
        by_duration(profiles),
        findings,
        options.get("detail_trace_ids"),
        options.get("context_windows", DEFAULT_CONTEXT_WINDOWS),
        encoded=lazy,
        already=options.get("encoded_traces", {}) if lazy else {},
    )
    splits = find_split_llm_calls(profiles)
    statistics = options.get("statistics")
    prefix_cache = options.get("prefix_cache")
    return {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "generator": f"otel-agent-profiler {__version__}",
        "selected_trace_id": selected.trace_id if selected is not None else None,
        "files": [dict(f) for f in options.get("files", ())],
        "totals": cross_trace_totals(profiles, splits).to_dict(),
        "split_llm_calls": [split.to_dict() for split in splits],
        "traces": traces if lazy else list(traces),
        "statistics": dict(statistics) if statistics is not None else None,
        "prefix_cache_candidates": [c.to_dict() for c in prefix_cache] if prefix_cache is not None else None,
        "backend_load": backend_load_across(profiles),
    }


def backend_load_across(profiles: Iterable[TraceProfile]) -> list[dict[str, Any]] | None:
    """The load LLM calls met, per inference server and model, across ``profiles``; None without any."""
    groups: dict[tuple[str, str], list[SpanProfile]] = {}
    for profile in profiles:
        for span in profile.spans:
            if span.backend_load is not None:
                groups.setdefault((span.backend_load.source, span.model or span.operation), []).append(span)
    if not groups:
        return None
    rows = []
    for (source, model), spans in sorted(groups.items()):
        summary = summarize_loads(spans)
        assert summary is not None  # every span of a group has a load
        waiting = [load.waiting_max for s in spans if (load := s.backend_load) and load.waiting_max is not None]
        rows.append(
            {
                "source": source,
                "model": model,
                "calls": summary.calls,
                "running_mean": summary.running_mean,
                "waiting_p50": percentile(waiting, 0.5) if waiting else None,
                "waiting_max": summary.waiting_max,
                "kv_cache_usage_max": summary.kv_cache_usage_max,
                "prefix_cache_hit_rate": summary.prefix_cache_hit_rate,
                "preemptions": summary.preemptions,
            }
        )
    return rows


def encoded_trace(
    profile: TraceProfile,
    found: Sequence[Finding] | None,
    detail_trace_ids: Collection[str] | None,
    context_windows: Mapping[str, int],
    *,
    schedule: RecordedSchedule | None = None,
) -> Encoded:
    """The summary's document of one trace with its findings, as :func:`write_summary` writes it.

    For worker processes, where the findings are made: the document comes back as its bytes, which
    the main process writes as they are. ``schedule``: the one the findings were made with (see
    ``find_all``), so that their combined projection does not build it again.
    """
    document = _trace_document(profile, found, detail_trace_ids, context_windows, encoded=True, schedule=schedule)
    return Encoded(_encode(document))


def _trace_document(
    profile: TraceProfile,
    found: Sequence[Finding] | None,
    detail_trace_ids: Collection[str] | None,
    context_windows: Mapping[str, int],
    *,
    encoded: bool,
    schedule: RecordedSchedule | None = None,
) -> dict[str, Any]:
    with_spans = detail_trace_ids is None or profile.trace_id in detail_trace_ids
    # Spans as structs only where msgspec encodes the documents: build_summary's callers get plain data.
    document = (
        trace_document(profile, context_windows, include_spans=with_spans)
        if encoded
        else trace_to_dict(profile, include_spans=with_spans, context_windows=context_windows)
    )
    document["findings"] = [f.to_dict() for f in found or ()]
    # Only where the findings were made: they need the span tree, which the others may have released.
    document["combined_projection"] = (
        combined_projection(profile, found, schedule=schedule).to_dict() if found is not None else None
    )
    return document


def _trace_documents(
    profiles: Iterable[TraceProfile],
    findings: Mapping[str, Sequence[Finding]],
    detail_trace_ids: Collection[str] | None,
    context_windows: Mapping[str, int],
    *,
    encoded: bool,
    already: Mapping[str, bytes],
) -> Iterator[dict[str, Any] | Encoded]:
    for profile in profiles:
        done = already.get(profile.trace_id)
        if done is not None:
            # Workers' results come back as Encoded already: no copy then.
            yield done if isinstance(done, Encoded) else Encoded(done)
            continue
        found = findings.get(profile.trace_id)
        yield _trace_document(profile, found, detail_trace_ids, context_windows, encoded=encoded)
