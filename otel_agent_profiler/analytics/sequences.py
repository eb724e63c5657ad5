"""What agents do, in order: call sequences per run, the most common ones and common n-grams.

A run's sequence lists its LLM and tool calls (counted spans of the chosen categories) by start
time, ties in the order of the span table (depth first), each written ``category:operation``,
e.g. ``llm:gpt-4o → tool:search_kb → llm:gpt-4o``. With ``collapse_repeats``, consecutive
identical steps become one: ``llm:gpt-4o-mini×12``. Parallel calls appear in the order they
started.
"""  # noqa: RUF002

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from typing_extensions import Unpack

from ..core.profile import TraceProfile
from .span_table import as_span_table, duration_ns_of, start_ns_of
from .statistics import grouped_summary

#: Joins the steps of a sequence.
ARROW = " → "
#: Joins a collapsed step and how many times it repeated.
REPEAT = "×"  # noqa: RUF001
DEFAULT_CATEGORIES: tuple[str, ...] = ("llm", "tool")

_DURATION_QUANTILES = (0.5, 0.9)


class RankingOptions(TypedDict, total=False):
    """How :func:`frequent_sequences` and :func:`frequent_ngrams` count and rank."""

    #: Consecutive identical steps count as one (see the module docs); default False.
    collapse_repeats: bool
    #: Keep the first ``top`` rows; default all.
    top: int | None
    #: Leave out rows seen fewer times; default 1.
    min_count: int
    #: Count only spans counted as calls (duplicates of one call once); default True.
    counted_only: bool


class _Steps:
    """The calls of every trace, in sequence order, as integer label codes."""

    def __init__(
        self,
        data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile,
        categories: Sequence[str],
        collapse_repeats: bool,
        counted_only: bool,
    ) -> None:
        table = as_span_table(data)
        start = start_ns_of(table)
        end = start + duration_ns_of(table)
        trace_codes, trace_ids = pd.factorize(table["trace_id"], sort=False)
        self.trace_ids = np.asarray(trace_ids, dtype=object)
        self.n_traces = len(trace_ids)
        first = np.full(self.n_traces, np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(self.n_traces, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(first, trace_codes, start)
        np.maximum.at(last, trace_codes, end)
        self.trace_duration_ms = (last - first) / 1e6

        keep = table["category"].isin(list(categories)).to_numpy(dtype=bool)
        if counted_only and "counted" in table:
            keep = keep & table["counted"].to_numpy(dtype=bool)
        rows = np.flatnonzero(keep)
        labels = (
            table["category"].astype(str).to_numpy(dtype=object)[rows]
            + ":"
            + table["operation"].astype(str).to_numpy(dtype=object)[rows]
        )
        label_codes, label_names = pd.factorize(labels, sort=True)
        order = np.lexsort((rows, start[rows], trace_codes[rows]))
        self.trace = trace_codes[rows][order].astype(np.int64)
        self.code = label_codes[order].astype(np.int64)
        self.start = start[rows][order]
        self.end = end[rows][order]
        self.labels = np.asarray(label_names, dtype=object)
        if collapse_repeats:
            self._collapse()

    def _collapse(self) -> None:
        n = len(self.code)
        if n == 0:
            return
        new_run = np.ones(n, dtype=bool)
        new_run[1:] = (self.code[1:] != self.code[:-1]) | (self.trace[1:] != self.trace[:-1])
        heads = np.flatnonzero(new_run)
        repeats = np.diff(np.append(heads, n))
        names = [
            self.labels[code] if k == 1 else f"{self.labels[code]}{REPEAT}{k}"
            for code, k in zip(self.code[heads], repeats, strict=True)
        ]
        codes, label_names = pd.factorize(np.asarray(names, dtype=object), sort=True)
        self.end = np.maximum.reduceat(self.end, heads)
        self.trace = self.trace[heads]
        self.code = codes.astype(np.int64)
        self.start = self.start[heads]
        self.labels = np.asarray(label_names, dtype=object)

    def bounds(self) -> np.ndarray:
        """Where each trace's steps begin in the step arrays (``n_traces + 1`` positions)."""
        return np.searchsorted(self.trace, np.arange(self.n_traces + 1), side="left")


def call_sequences(
    data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    *,
    collapse_repeats: bool = False,
    counted_only: bool = True,
) -> pd.DataFrame:
    """One row per trace: trace_id, sequence (steps joined by ``" → "``), steps, duration_ms of the run.

    A trace without calls of the chosen categories has an empty sequence and 0 steps.
    """
    steps = _Steps(data, categories, collapse_repeats, counted_only)
    bounds = steps.bounds()
    names = steps.labels[steps.code] if len(steps.code) else np.array([], dtype=object)
    sequences = [ARROW.join(names[bounds[i] : bounds[i + 1]]) for i in range(steps.n_traces)]
    return pd.DataFrame(
        {
            "trace_id": pd.array(steps.trace_ids.tolist(), dtype=pd.StringDtype()),
            "sequence": pd.array(sequences, dtype=pd.StringDtype()),
            "steps": np.diff(bounds).astype(np.int64),
            "duration_ms": steps.trace_duration_ms.astype(np.float64),
        }
    )


def frequent_sequences(
    data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    **options: Unpack[RankingOptions],
) -> pd.DataFrame:
    """Whole-run sequences by how many runs followed them, with the run durations of each.

    Columns: sequence, steps, count (runs), share (of all runs), mean_duration_ms,
    p50_duration_ms, p90_duration_ms, min_duration_ms, max_duration_ms, example_trace_id (the first
    such run). Most common first; ties by shorter mean duration, then sequence.
    """
    per_trace = call_sequences(
        data,
        categories,
        collapse_repeats=options.get("collapse_repeats", False),
        counted_only=options.get("counted_only", True),
    )
    codes, uniques = pd.factorize(per_trace["sequence"], sort=True)
    n_groups = len(uniques)
    summary = grouped_summary(
        codes.astype(np.int64), per_trace["duration_ms"].to_numpy(np.float64), n_groups, [0.5, 0.9]
    )
    first_trace = np.full(n_groups, len(per_trace), dtype=np.int64)
    np.minimum.at(first_trace, codes, np.arange(len(per_trace)))
    steps = np.zeros(n_groups, dtype=np.int64)
    steps[codes] = per_trace["steps"].to_numpy(np.int64)
    frame = pd.DataFrame(
        {
            "sequence": pd.array(np.asarray(uniques, dtype=object).tolist(), dtype=pd.StringDtype()),
            "steps": steps,
            "count": summary["count"].astype(np.int64),
            "share": summary["count"] / max(len(per_trace), 1),
            "mean_duration_ms": summary["mean"],
            "p50_duration_ms": summary["q0.5"],
            "p90_duration_ms": summary["q0.9"],
            "min_duration_ms": summary["min"],
            "max_duration_ms": summary["max"],
            "example_trace_id": pd.array(
                per_trace["trace_id"].to_numpy(dtype=object)[first_trace].tolist() if n_groups else [],
                dtype=pd.StringDtype(),
            ),
        }
    )
    return _rank(frame, options, ["count", "mean_duration_ms", "sequence"], [False, True, True])


def frequent_ngrams(
    data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile,
    n: int | Iterable[int] = 3,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    **options: Unpack[RankingOptions],
) -> pd.DataFrame:
    """Common runs of ``n`` consecutive steps (for each ``n`` given), across all traces.

    Columns: n, ngram (steps joined by ``" → "``), count (occurrences, overlapping ones included),
    traces (runs containing it), share_of_traces, and the duration of an occurrence, from its first
    call's start to the last end of its calls: mean_duration_ms, p50_duration_ms, p90_duration_ms.
    Most common first; ties by n, then ngram.
    """
    sizes = [n] if isinstance(n, int) else sorted(set(n))
    if not sizes or min(sizes) < 1:
        raise ValueError(f"n must be 1 or more, got {n}")
    steps = _Steps(data, categories, options.get("collapse_repeats", False), options.get("counted_only", True))
    frames = [_ngrams(steps, size) for size in sizes]
    filled = [frame for frame in frames if len(frame)]
    frame = pd.concat(filled, ignore_index=True) if filled else frames[0]
    return _rank(frame, options, ["count", "n", "ngram"], [False, True, True])


def _ngrams(steps: _Steps, size: int) -> pd.DataFrame:
    columns: dict[str, Any]
    if len(steps.code) >= size:
        windows = sliding_window_view(steps.code, size)
        traces = steps.trace[: len(windows)]
        whole = traces == steps.trace[size - 1 :]
        windows = windows[whole]
        traces = traces[whole]
        starts = steps.start[: len(whole)][whole]
        ends = sliding_window_view(steps.end, size)[whole].max(axis=1)
    else:
        windows = np.zeros((0, size), dtype=np.int64)
        traces = starts = ends = np.array([], dtype=np.int64)
    if len(windows):
        grams, inverse, counts = _unique_rows(windows, len(steps.labels))
    else:
        grams, inverse, counts = windows, np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    n_grams = len(grams)
    pairs = np.unique(inverse * max(steps.n_traces, 1) + traces)
    in_traces = np.bincount(pairs // max(steps.n_traces, 1), minlength=n_grams) if n_grams else counts
    summary = grouped_summary(inverse, (ends - starts) / 1e6, n_grams, _DURATION_QUANTILES)
    columns = {
        "n": np.full(n_grams, size, dtype=np.int64),
        "ngram": pd.array([ARROW.join(steps.labels[row]) for row in grams], dtype=pd.StringDtype()),
        "count": counts.astype(np.int64),
        "traces": in_traces.astype(np.int64),
        "share_of_traces": in_traces / max(steps.n_traces, 1),
        "mean_duration_ms": summary["mean"],
        "p50_duration_ms": summary["q0.5"],
        "p90_duration_ms": summary["q0.9"],
    }
    return pd.DataFrame(columns)


def _unique_rows(windows: np.ndarray, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(windows, axis=0, return_inverse=True, return_counts=True)``, inverse flat.

    Each window of label codes (each below ``n_labels``) read as one number in base ``n_labels``
    sorts as the window does, so one sort of integers does what ``axis=0`` does by sorting the rows
    as records: 0.01 s against 0.2 s for the 89,000 windows of the CLI benchmark's lean export.
    Windows whose number would not fit in 63 bits take ``axis=0``.
    """
    size = windows.shape[1]
    base = max(n_labels, 1)
    if base**size >= 2**63:
        grams, inverse, counts = np.unique(windows, axis=0, return_inverse=True, return_counts=True)
        return grams, inverse.reshape(-1), counts
    keys = np.zeros(len(windows), dtype=np.int64)
    for column in range(size):
        keys = keys * base + windows[:, column]
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    return windows[first], inverse.reshape(-1), counts


def _rank(frame: pd.DataFrame, options: RankingOptions, keys: list[str], ascending: list[bool]) -> pd.DataFrame:
    frame = frame[frame["count"] >= options.get("min_count", 1)]
    top = options.get("top")
    frame = frame.sort_values(keys, ascending=ascending, kind="stable", na_position="last")
    if top is not None:
        frame = frame.head(top)
    return frame.reset_index(drop=True)
