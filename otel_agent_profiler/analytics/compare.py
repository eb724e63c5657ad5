"""Baseline against candidate: did a change make the agent slower or hungrier, and is it real?

:func:`compare_runs` compares two sets of runs per run, per category and per operation, metric by
metric. Each row holds both sides' means and medians, their relative changes, a Mann-Whitney U
test and Cliff's delta, and a verdict. A metric is a **regression** when it got worse (larger) by
more than ``threshold`` (relative change of the mean, or of the median with ``center="median"``)
**and** the test says the difference is unlikely to be chance (``p < alpha``); ``exit_code`` of the
result is then 1, so a CI job can fail on it.

Samples, per row (column ``sample``):

* ``span``: one value per call (counted span) of the category or operation;
* ``trace``: one value per run, the run's total for the category or operation (0 for a run without
  such calls), with ``calls`` (how many calls a run makes) as an extra metric; at ``level="run"``,
  the run's own totals (wall-clock duration, critical path, LLM and tool calls, tokens, cost).

The Mann-Whitney U test uses the normal approximation with the tie correction and a continuity
correction of 0.5 (as R's ``wilcox.test(exact=FALSE)`` and SciPy's ``mannwhitneyu(method=
"asymptotic")``)::

    U     = R_candidate - n_c (n_c + 1) / 2         (rank sum of the candidate values, ties averaged)
    sigma = sqrt(n_b n_c / 12 · ((n + 1) - Σ(t³ - t) / (n (n - 1))))     (t: size of each tie group)
    z     = max(|U - n_b n_c / 2| - 0.5, 0) / sigma
    p     = erfc(z / √2)                             (two-sided)

It needs no distribution assumption; the normal approximation is rough below about 10 values a
side, and rows with fewer than ``min_samples`` (default 5) on either side get the verdict
``insufficient_data``; with fewer runs than that on a side, no run total is tested and the
comparison says so (``too_few_runs``) rather than "no regression". Cliff's delta is
``P(candidate > baseline) - P(candidate < baseline)``
(from -1 to 1; 0 for no difference; above about 0.33 is a medium and 0.47 a large effect).
Everything is deterministic.

A comparison tests many rows (about 160 for typical agent runs), so at ``alpha = 0.05`` a few can
pass the test by chance; the ``threshold`` on the change keeps most of them from being called
regressions. ``p_adjust="holm"`` adjusts the p-values for the number of rows (Holm-Bonferroni)
before the verdicts: the chance of any false alarm stays below alpha, but only large or
well-sampled changes show.
"""

from __future__ import annotations

import enum
import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import pandas as pd

from ..core.categories import CATEGORIES
from ..core.profile import TraceProfile
from ..core.units import format_duration, format_usd, plural
from .span_table import as_span_table, trace_table
from .statistics import group_codes, grouped_summary

SPAN_METRICS: tuple[str, ...] = ("duration_ms", "self_time_ms", "critical_path_ms", "total_tokens")
#: The span table's columns a comparison reads: ``span_table(profiles, columns=COMPARED_COLUMNS)``
#: compares the same as the whole table, for about a third of its cost.
COMPARED_COLUMNS: tuple[str, ...] = (
    "trace_id",
    "span_id",
    "category",
    "operation",
    "start",
    "counted",
    *SPAN_METRICS,
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "cost_usd",
)
RUN_METRICS: tuple[str, ...] = (
    "duration_ms",
    "critical_path_ms",
    "llm_calls",
    "tool_calls",
    "total_tokens",
    "cost_usd",
)
LEVELS: tuple[str, ...] = ("run", "category", "operation")

RunData: TypeAlias = pd.DataFrame | Iterable[TraceProfile] | TraceProfile


class Verdict(str, enum.Enum):
    """What a comparison row says about the candidate."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INSUFFICIENT_DATA = "insufficient_data"


@dataclass(frozen=True, slots=True)
class MannWhitneyResult:
    #: U of the first sample: the pairs where it is larger, plus half the ties.
    u: float
    z: float
    p_value: float


def mann_whitney_u(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> MannWhitneyResult:
    """Two-sided Mann-Whitney U test of ``x`` against ``y`` (normal approximation, tie and continuity corrected)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both samples need at least one value")
    values = np.concatenate([b, a])
    flags = np.concatenate([np.zeros(len(b), dtype=bool), np.ones(len(a), dtype=bool)])
    u, z, p, _ = _grouped_mann_whitney(np.zeros(len(values), dtype=np.int64), values, flags, 1)
    return MannWhitneyResult(float(u[0]), float(z[0]), float(p[0]))


def cliffs_delta(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """``P(x > y) - P(x < y)`` over all pairs: 1 when every ``x`` is larger, -1 when every one is smaller."""
    u = mann_whitney_u(x, y).u
    return 2.0 * u / (len(x) * len(y)) - 1.0


def _grouped_mann_whitney(
    groups: np.ndarray, values: np.ndarray, is_candidate: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """U (of the candidate), z, two-sided p and Cliff's delta for every group at once.

    One sort ranks every group's values (ties get their average rank); NaN values are left out.
    Groups with an empty side get NaN.
    """
    keep = ~np.isnan(values)
    groups, values, is_candidate = groups[keep], values[keep], is_candidate[keep]
    order = np.lexsort((values, groups))
    groups, values, is_candidate = groups[order], values[order], is_candidate[order]
    size = np.bincount(groups, minlength=n_groups).astype(np.float64)
    n_c = np.bincount(groups, is_candidate.astype(np.float64), n_groups).astype(np.float64, copy=False)
    n_b = size - n_c
    first_of_group = (np.cumsum(size) - size).astype(np.int64)
    position = np.arange(len(values)) - first_of_group[groups]
    new_tie = np.ones(len(values), dtype=bool)
    new_tie[1:] = (values[1:] != values[:-1]) | (groups[1:] != groups[:-1])
    tie_id = np.cumsum(new_tie) - 1
    tie_first = position[new_tie]
    tie_size = np.bincount(tie_id).astype(np.float64)
    rank = tie_first[tie_id] + (tie_size[tie_id] + 1.0) / 2.0
    rank_sum = np.bincount(groups, rank * is_candidate, n_groups).astype(np.float64, copy=False)
    ties = np.bincount(groups[new_tie], tie_size**3 - tie_size, n_groups).astype(np.float64, copy=False)

    with np.errstate(invalid="ignore", divide="ignore"):
        u = rank_sum - n_c * (n_c + 1.0) / 2.0
        mu = n_b * n_c / 2.0
        tie_factor = np.where(size > 1, ties / (size * (size - 1.0)), 0.0)
        sigma = np.sqrt(np.maximum(n_b * n_c / 12.0 * ((size + 1.0) - tie_factor), 0.0))
        z = np.where(sigma > 0, np.maximum(np.abs(u - mu) - 0.5, 0.0) / sigma, 0.0) * np.sign(u - mu)
        delta = 2.0 * u / (n_b * n_c) - 1.0
    p = np.array([math.erfc(abs(value) / math.sqrt(2.0)) for value in z], dtype=np.float64)
    empty = (n_b == 0) | (n_c == 0)
    u[empty] = np.nan
    z[empty] = np.nan
    p[empty] = np.nan
    delta[empty] = np.nan
    return u, z, p, delta


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN left alone)."""
    adjusted = np.full_like(p, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    if not len(tested):
        return adjusted
    order = tested[np.argsort(p[tested], kind="stable")]
    m = len(order)
    scaled = np.minimum((m - np.arange(m)) * p[order], 1.0)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_runs`: one row per level, group, sample and metric."""

    #: Columns: level, category, operation, sample, metric, baseline_n, candidate_n, baseline_mean,
    #: candidate_mean, baseline_median, candidate_median, mean_change, median_change, u, p_value,
    #: p_adjusted, cliffs_delta, verdict.
    table: pd.DataFrame
    threshold: float
    alpha: float
    center: str
    #: Runs on each side, and how many a side needs before a row is tested (``min_samples``).
    baseline_runs: int = 0
    candidate_runs: int = 0
    min_samples: int = 5

    @property
    def regressions(self) -> pd.DataFrame:
        return self.table[self.table["verdict"] == Verdict.REGRESSION.value].reset_index(drop=True)

    @property
    def improvements(self) -> pd.DataFrame:
        return self.table[self.table["verdict"] == Verdict.IMPROVEMENT.value].reset_index(drop=True)

    @property
    def has_regression(self) -> bool:
        return bool((self.table["verdict"] == Verdict.REGRESSION.value).any())

    @property
    def too_few_runs(self) -> bool:
        """Whether a side has fewer runs than a test needs: the run totals (duration, cost, calls)
        were not tested, so "no regression" would say nothing about them."""
        return min(self.baseline_runs, self.candidate_runs) < self.min_samples

    @property
    def untested_rows(self) -> int:
        """How many rows had too few values on a side to be tested (verdict ``insufficient_data``)."""
        return int((self.table["verdict"] == Verdict.INSUFFICIENT_DATA.value).sum())

    @property
    def exit_code(self) -> int:
        """1 when anything regressed, else 0: what a CI gate exits with."""
        return 1 if self.has_regression else 0

    def summary(self) -> str:
        """One line per regression (or a line saying there is none), for a terminal or a CI log."""
        rows = self.regressions
        worse = f"worse by more than {self.threshold:.0%}"
        if rows.empty:
            if self.too_few_runs:
                return self._too_few_runs_line()
            return f"no regression: nothing got {worse} with p < {self.alpha}"
        found = plural(len(rows), "regression")
        lines = [f"{found}, {worse} on the {self.center} with p < {self.alpha}:"]
        for row in rows.itertuples(index=False):
            if row.level == "run":
                what = "the whole run"
            elif row.level == "operation":
                what = f"{row.operation} ({row.category})"
            else:
                what = f"all {row.category} calls"
            before = row.baseline_mean if self.center == "mean" else row.baseline_median
            after = row.candidate_mean if self.center == "mean" else row.candidate_median
            change = row.mean_change if self.center == "mean" else row.median_change
            lines.append(
                f"  {what}, {_METRIC_WORDS.get(row.metric, row.metric)} {_PER_SAMPLE.get(row.sample, row.sample)}: "
                f"{_value(row.metric, before)} -> {_value(row.metric, after)} ({change:+.1%}), "
                f"p = {row.p_adjusted:.3g}, Cliff's delta {row.cliffs_delta:+.2f}"
            )
        lines += textwrap.wrap(
            "(p: how likely a difference this large is between runs that differ only by chance, by a "
            "Mann-Whitney U test; Cliff's delta: how much more often the candidate's value is the larger, "
            "from -1 to +1)",
            80,
            initial_indent="  ",
            subsequent_indent="   ",
        )
        if self.too_few_runs:
            lines.append(self._too_few_runs_line())
        return "\n".join(lines)

    def _too_few_runs_line(self) -> str:
        return (
            f"too few runs to decide: a test needs at least {self.min_samples} runs a side, so "
            f"{self.untested_rows} of the {len(self.table)} compared rows (every run total among them) were not "
            "tested; compare more runs"
        )


#: The metrics of the table as the summary names them.
_METRIC_WORDS = {
    "duration_ms": "duration",
    "self_time_ms": "self time",
    "critical_path_ms": "critical-path time",
    "total_tokens": "tokens",
    "llm_calls": "LLM calls",
    "tool_calls": "tool calls",
    "cost_usd": "cost",
    "calls": "calls",
}
#: What one value of a row's sample is (see the module docs).
_PER_SAMPLE = {"span": "per call", "trace": "per run"}


def _value(metric: str, value: float) -> str:
    """A metric's value as the reports write it: durations in SI units, costs in dollars."""
    if metric.endswith("_ms"):
        return format_duration(value * 1e6)
    if metric.endswith("_usd"):
        return format_usd(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


class _Side:
    """What one set of runs contributes: its span arrays and its trace table."""

    def __init__(self, data: RunData, counted_only: bool) -> None:
        table = as_span_table(data)
        self.traces = trace_table(table)
        self.n_traces = len(self.traces)
        trace_codes, _ = pd.factorize(table["trace_id"], sort=False)
        keep = table["counted"].to_numpy(dtype=bool) if counted_only else np.ones(len(table), dtype=bool)
        self.trace = trace_codes[keep].astype(np.int64)
        self.category = table["category"].astype(str).to_numpy(dtype=object)[keep]
        self.operation = table["operation"].astype(str).to_numpy(dtype=object)[keep]
        self.values = {
            metric: table[metric].to_numpy(dtype=np.float64, na_value=np.nan)[keep] for metric in SPAN_METRICS
        }


def compare_runs(
    baseline: RunData,
    candidate: RunData,
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    center: Literal["mean", "median"] = "mean",
    min_samples: int = 5,
    levels: Sequence[str] = LEVELS,
    span_metrics: Sequence[str] = SPAN_METRICS,
    run_metrics: Sequence[str] = RUN_METRICS,
    p_adjust: Literal["none", "holm"] = "none",
    counted_only: bool = True,
) -> Comparison:
    """Compare ``candidate`` runs to ``baseline`` runs (span tables or profiles); see the module docs.

    Rows: level (``run``, ``category``, ``operation``), category and operation (``<NA>`` where they do
    not apply), sample (``span`` or ``trace``), metric; both sides' n, means and medians, the relative
    changes (``(candidate - baseline) / baseline``; ``inf`` from a baseline of 0), U, p, the adjusted
    p (equal to p with ``p_adjust="none"``), Cliff's delta and the verdict (a ``Verdict`` value).
    Only groups with calls on at least one side are listed.
    """
    if center not in ("mean", "median"):
        raise ValueError(f"center must be 'mean' or 'median', got {center!r}")
    if threshold < 0 or not 0 < alpha < 1:
        raise ValueError("threshold must be 0 or more and alpha between 0 and 1")
    unknown = set(levels) - set(LEVELS)
    if unknown:
        raise ValueError(f"unknown levels {sorted(unknown)}; choose from {LEVELS}")
    unknown_metrics = set(span_metrics) - set(SPAN_METRICS)
    if unknown_metrics:
        raise ValueError(f"unknown span metrics {sorted(unknown_metrics)}; choose from {SPAN_METRICS}")
    base = _Side(baseline, counted_only)
    cand = _Side(candidate, counted_only)

    pieces: list[pd.DataFrame] = []
    if "run" in levels:
        pieces.append(_run_rows(base, cand, run_metrics))
    for level in ("category", "operation"):
        if level in levels:
            pieces.extend(_group_rows(base, cand, level, span_metrics))
    filled = [piece for piece in pieces if len(piece)]
    table = pd.concat(filled, ignore_index=True) if filled else _rows_frame([], [], [], [], [], [], [])

    p = table["p_value"].to_numpy(dtype=np.float64)
    table["p_adjusted"] = _holm(p) if p_adjust == "holm" else p
    table["cliffs_delta"] = table.pop("cliffs_delta")
    table["verdict"] = _verdicts(table, threshold, alpha, center, min_samples)
    return Comparison(
        table=table,
        threshold=threshold,
        alpha=alpha,
        center=center,
        baseline_runs=base.n_traces,
        candidate_runs=cand.n_traces,
        min_samples=min_samples,
    )


def _verdicts(table: pd.DataFrame, threshold: float, alpha: float, center: str, min_samples: int) -> pd.Series:
    change = table["mean_change" if center == "mean" else "median_change"].to_numpy(dtype=np.float64)
    p = table["p_adjusted"].to_numpy(dtype=np.float64)
    enough = (table["baseline_n"].to_numpy() >= min_samples) & (table["candidate_n"].to_numpy() >= min_samples)
    significant = enough & (p < alpha)
    verdict = np.full(len(table), Verdict.UNCHANGED.value, dtype=object)
    verdict[significant & (change > threshold)] = Verdict.REGRESSION.value
    verdict[significant & (change < -threshold)] = Verdict.IMPROVEMENT.value
    verdict[~enough] = Verdict.INSUFFICIENT_DATA.value
    return pd.Series(verdict, index=table.index, dtype=pd.StringDtype())


def _relative(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        change = (after - before) / np.abs(before)
    change = np.where(before == 0, np.where(after > 0, np.inf, np.where(after < 0, -np.inf, 0.0)), change)
    return np.where(np.isnan(before) | np.isnan(after), np.nan, change)


def _test_rows(
    groups: np.ndarray,
    values: np.ndarray,
    is_candidate: np.ndarray,
    n_groups: int,
) -> dict[str, np.ndarray]:
    """Both sides' summaries and the test, per group."""
    candidate_groups = np.where(is_candidate, groups, -1)
    baseline_groups = np.where(is_candidate, -1, groups)
    b = grouped_summary(baseline_groups, values, n_groups, [0.5])
    c = grouped_summary(candidate_groups, values, n_groups, [0.5])
    u, _, p, delta = _grouped_mann_whitney(groups, values, is_candidate, n_groups)
    return {
        "baseline_n": b["count"].astype(np.int64),
        "candidate_n": c["count"].astype(np.int64),
        "baseline_mean": b["mean"],
        "candidate_mean": c["mean"],
        "baseline_median": b["q0.5"],
        "candidate_median": c["q0.5"],
        "mean_change": _relative(b["mean"], c["mean"]),
        "median_change": _relative(b["q0.5"], c["q0.5"]),
        "u": u,
        "p_value": p,
        "cliffs_delta": delta,
    }


_RESULT_COLUMNS = (
    "baseline_n",
    "candidate_n",
    "baseline_mean",
    "candidate_mean",
    "baseline_median",
    "candidate_median",
    "mean_change",
    "median_change",
    "u",
    "p_value",
    "cliffs_delta",
)


def _rows_frame(
    level: Sequence[str],
    category: Sequence[str | None],
    operation: Sequence[str | None],
    sample: Sequence[str],
    metric: Sequence[str],
    results: Sequence[dict[str, np.ndarray]],
    keep: Sequence[np.ndarray],
) -> pd.DataFrame:
    columns: dict[str, Any] = {
        "level": pd.array(list(level), dtype=pd.StringDtype()),
        "category": pd.array(list(category), dtype=pd.StringDtype()),
        "operation": pd.array(list(operation), dtype=pd.StringDtype()),
        "sample": pd.array(list(sample), dtype=pd.StringDtype()),
        "metric": pd.array(list(metric), dtype=pd.StringDtype()),
    }
    for name in _RESULT_COLUMNS:
        dtype = np.int64 if name.endswith("_n") else np.float64
        parts = [result[name][mask] for result, mask in zip(results, keep, strict=True)]
        columns[name] = np.concatenate(parts).astype(dtype) if parts else np.array([], dtype=dtype)
    return pd.DataFrame(columns)


def _run_rows(base: _Side, cand: _Side, metrics: Sequence[str]) -> pd.DataFrame:
    is_candidate = np.concatenate([np.zeros(base.n_traces, dtype=bool), np.ones(cand.n_traces, dtype=bool)])
    groups = np.zeros(len(is_candidate), dtype=np.int64)
    level: list[str] = []
    metric_names: list[str] = []
    results: list[dict[str, np.ndarray]] = []
    keep: list[np.ndarray] = []
    for metric in metrics:
        if metric not in base.traces or metric not in cand.traces:
            raise ValueError(f"unknown run metric {metric!r}")
        values = np.concatenate(
            [
                base.traces[metric].to_numpy(dtype=np.float64, na_value=np.nan),
                cand.traces[metric].to_numpy(dtype=np.float64, na_value=np.nan),
            ]
        )
        result = _test_rows(groups, values, is_candidate, 1)
        present = (result["baseline_n"] + result["candidate_n"]) > 0
        if present[0]:
            level.append("run")
            metric_names.append(metric)
        results.append(result)
        keep.append(present)
    n = len(level)
    return _rows_frame(level, [None] * n, [None] * n, ["trace"] * n, metric_names, results, keep)


def _group_rows(base: _Side, cand: _Side, level: str, metrics: Sequence[str]) -> list[pd.DataFrame]:
    """Rows of one level: per group, the span samples of each metric, then the per-trace totals."""
    category = np.concatenate([base.category, cand.category])
    operation = np.concatenate([base.operation, cand.operation])
    present = set(category.tolist())
    ordered = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    keys = pd.DataFrame({"category": pd.Categorical(category, categories=ordered)})
    if level == "operation":
        keys["operation"] = operation
    groups, group_keys = group_codes(keys, list(keys.columns))
    n_groups = len(group_keys)
    n_base = len(base.trace)
    is_candidate = np.concatenate([np.zeros(n_base, dtype=bool), np.ones(len(cand.trace), dtype=bool)])
    # Per-trace totals: traces of both sides numbered apart (the same trace id may be on both sides).
    trace = np.concatenate([base.trace, cand.trace + base.n_traces])
    n_traces = base.n_traces + cand.n_traces
    cell_group = np.tile(np.arange(n_groups), n_traces)
    cell_candidate = np.repeat(np.arange(n_traces) >= base.n_traces, n_groups)
    cell = trace * n_groups + groups

    blocks: list[tuple[str, str, dict[str, np.ndarray]]] = []
    for metric in metrics:
        values = np.concatenate([base.values[metric], cand.values[metric]])
        blocks.append(("span", metric, _test_rows(groups, values, is_candidate, n_groups)))
    for metric in ("calls", *metrics):
        if metric == "calls":
            weights = np.ones(len(cell), dtype=np.float64)
        else:
            weights = np.nan_to_num(np.concatenate([base.values[metric], cand.values[metric]]), nan=0.0)
        totals = np.bincount(cell, weights, n_traces * n_groups).astype(np.float64, copy=False)
        blocks.append(("trace", metric, _test_rows(cell_group, totals, cell_candidate, n_groups)))

    # A group's rows together: group by group, then span samples before trace totals, metrics in order.
    frames = []
    categories = [str(value) for value in group_keys["category"]]
    operations = [str(value) for value in group_keys["operation"]] if level == "operation" else [None] * n_groups
    for g in range(n_groups):
        rows_level, rows_category, rows_operation, rows_sample, rows_metric = [], [], [], [], []
        results, keep = [], []
        for sample, metric, result in blocks:
            mask = np.zeros(n_groups, dtype=bool)
            mask[g] = (result["baseline_n"][g] + result["candidate_n"][g]) > 0
            if sample == "trace" and metric != "calls":
                # A per-trace total of a metric no call of the group has (tokens of a tool) says nothing.
                span_result = next(r for s, m, r in blocks if s == "span" and m == metric)
                mask[g] &= (span_result["baseline_n"][g] + span_result["candidate_n"][g]) > 0
            if mask[g]:
                rows_level.append(level)
                rows_category.append(categories[g])
                rows_operation.append(operations[g])
                rows_sample.append(sample)
                rows_metric.append(metric)
            results.append(result)
            keep.append(mask)
        frames.append(_rows_frame(rows_level, rows_category, rows_operation, rows_sample, rows_metric, results, keep))
    return frames
