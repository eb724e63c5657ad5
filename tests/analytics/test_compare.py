"""Baseline against candidate: Mann-Whitney U, Cliff's delta, verdicts and the CI exit code."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pandas as pd
import pytest

from benchmarks.agent_traces import MS, _Run, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import Verdict, cliffs_delta, compare_runs, mann_whitney_u, span_table
from otel_agent_profiler.analytics.compare import _grouped_mann_whitney, _holm
from otel_agent_profiler.core import profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, span

EPOCH = 1_700_000_000_000_000_000


class SlowTool(random.Random):
    """A random source that makes one tool's calls ``factor`` times longer in the generated runs."""

    def __init__(self, seed: int, tool: str | None = None, factor: float = 1.0) -> None:
        super().__init__(seed)
        self.tool = tool
        self.factor = factor
        self.last_choice: object = None

    def choice(self, seq):  # type: ignore[override]
        self.last_choice = value = super().choice(seq)
        return value

    def uniform(self, a: float, b: float) -> float:
        value = super().uniform(a, b)
        # _Run.tool picks the tool, then draws its duration as uniform(20, 800) milliseconds.
        if self.last_choice == self.tool and (a, b) == (20, 800):
            value *= self.factor
        self.last_choice = None
        return value


def generated(runs: int, seed: int, tool: str | None = None, factor: float = 1.0):
    """Profiles of ``runs`` agent runs, as benchmarks/agent_traces.generate_runs makes them."""
    rng = SlowTool(seed, tool, factor)
    spans = []
    t = 1_760_000_000_000_000_000
    for number in range(runs):
        run = _Run(rng, number)
        run.agent("research_assistant", None, t, rng.randint(2, 6))
        spans.extend(run.spans)
        t += int(rng.uniform(50, 500) * MS)
    return profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "generated").records)


def find(table: pd.DataFrame, level: str, metric: str, sample: str = "span", **keys: str) -> pd.Series:
    mask = (table["level"] == level) & (table["metric"] == metric) & (table["sample"] == sample)
    for column, value in keys.items():
        mask &= table[column] == value
    (index,) = np.flatnonzero(mask.to_numpy(dtype=bool))
    return table.iloc[index]


# ----------------------------------------------------------------------------------------------------------------
# The test itself


# p-values of SciPy 1.17 ``mannwhitneyu(x, y, method="asymptotic")`` (continuity and tie corrected),
# the same as R's ``wilcox.test(x, y, exact=FALSE)``.
KNOWN = [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.012185780355344813),
    ([1, 2, 2, 3, 5], [2, 3, 3, 4, 4, 6], 8.0, 0.22559760855754862),
    ([3.1, 4.2, 4.2, 5.0, 6.3, 7.7, 7.7, 8.1], [1.0, 2.2, 3.1, 3.1, 4.2, 5.5], 41.0, 0.03143471006413017),
    ([10, 20, 30, 40, 50, 60, 70], [15, 25, 35, 45, 55, 65, 75, 85], 21.0, 0.45191345827907314),
]


@pytest.mark.parametrize(("x", "y", "u", "p"), KNOWN)
def test_mann_whitney_matches_known_values(x, y, u, p) -> None:
    result = mann_whitney_u(x, y)
    assert result.u == u
    assert result.p_value == pytest.approx(p, rel=1e-12)
    # Symmetric: swapping the samples gives the complementary U and the same p.
    swapped = mann_whitney_u(y, x)
    assert swapped.u == len(x) * len(y) - u
    assert swapped.p_value == pytest.approx(p, rel=1e-12)


def test_mann_whitney_by_hand_with_ties() -> None:
    x, y = [1, 2, 2, 3, 5], [2, 3, 3, 4, 4, 6]
    # All 11 values sorted: 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6. Tied values share the average of their
    # ranks: the three 2s ranks 2-4 (3 each), the three 3s ranks 5-7 (6), the two 4s ranks 8-9 (8.5).
    ranks_x = [1, 3, 3, 6, 10]  # x = 1, 2, 2, 3, 5
    u = sum(ranks_x) - 5 * 6 / 2
    assert u == 8.0
    n1, n2, n = 5, 6, 11
    ties = (3**3 - 3) + (3**3 - 3) + (2**3 - 2)
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    expected = math.erfc(z / math.sqrt(2))
    result = mann_whitney_u(x, y)
    assert result.u == u
    assert result.p_value == pytest.approx(expected, rel=1e-12)
    assert result.z == pytest.approx(-z, rel=1e-12)


def test_mann_whitney_degenerate_cases() -> None:
    assert mann_whitney_u([1, 1, 1], [1, 1]).p_value == 1.0  # all tied: no evidence at all
    assert mann_whitney_u([1, 2, 3], [1, 2, 3]).p_value == 1.0
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])


def test_cliffs_delta() -> None:
    assert cliffs_delta([1, 2, 3], [4, 5, 6]) == -1.0
    assert cliffs_delta([4, 5, 6], [1, 2, 3]) == 1.0
    # Pairs: 1 < 2, 2, 4; 2 = 2, 2 and < 4; 3 > 2, 2 and < 4: 2 larger, 5 smaller (2 ties), of 9.
    assert cliffs_delta([1, 2, 3], [2, 2, 4]) == pytest.approx((2 - 5) / 9)
    x, y = np.random.default_rng(1).normal(size=(2, 40))
    by_pairs = (np.sign(x[:, None] - y[None, :])).mean()
    assert cliffs_delta(x, y) == pytest.approx(by_pairs)


def test_grouped_test_equals_one_test_per_group() -> None:
    rng = np.random.default_rng(4)
    groups = rng.integers(0, 5, size=600)
    values = np.round(rng.exponential(100, size=600))  # rounded: plenty of ties
    flags = rng.random(600) < 0.4
    u, _, p, delta = _grouped_mann_whitney(groups, values, flags, 6)
    for g in range(5):
        candidate, baseline = values[(groups == g) & flags], values[(groups == g) & ~flags]
        single = mann_whitney_u(candidate, baseline)
        assert u[g] == single.u
        assert p[g] == pytest.approx(single.p_value, rel=1e-12)
        assert delta[g] == pytest.approx(cliffs_delta(candidate, baseline))
    assert np.isnan(p[5])


def test_holm_adjustment() -> None:
    adjusted = _holm(np.array([0.01, 0.04, np.nan, 0.03, 0.5]))
    # Sorted 0.01, 0.03, 0.04, 0.5 times 4, 3, 2, 1, kept non-decreasing.
    assert adjusted[[0, 3, 1, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert np.isnan(adjusted[2])


# ----------------------------------------------------------------------------------------------------------------
# Comparing runs


@pytest.fixture(scope="module")
def baseline():
    return generated(50, seed=1)


def test_identical_sets_show_no_regression(baseline) -> None:
    comparison = compare_runs(baseline, baseline)
    table = comparison.table
    assert not comparison.has_regression
    assert comparison.exit_code == 0
    assert set(table["verdict"]) <= {Verdict.UNCHANGED.value, Verdict.INSUFFICIENT_DATA.value}
    tested = table["p_value"].notna()
    assert (table.loc[tested, "p_value"] == 1.0).all()
    assert (table.loc[tested, "cliffs_delta"] == 0.0).all()
    assert (table["mean_change"].fillna(0) == 0).all()
    assert comparison.summary().startswith("no regression")


def test_a_tool_thirty_percent_slower_is_a_regression(baseline) -> None:
    # The same workload (seed) with search_kb 30% slower: about 80 calls a side.
    candidate = generated(50, seed=1, tool="search_kb", factor=1.3)
    comparison = compare_runs(baseline, candidate)
    row = find(comparison.table, "operation", "duration_ms", category="tool", operation="search_kb")
    assert row["verdict"] == Verdict.REGRESSION.value
    assert row["p_value"] < 0.05
    assert row["mean_change"] > 0.10
    assert row["baseline_n"] >= 50 and row["candidate_n"] >= 50
    assert row["cliffs_delta"] > 0
    assert comparison.has_regression and comparison.exit_code == 1
    assert "search_kb (tool), duration per call: " in comparison.summary()
    regressed = comparison.regressions
    assert (regressed["verdict"] == "regression").all()
    assert ((regressed["mean_change"] > 0.10) & (regressed["p_value"] < 0.05)).all()


def test_a_slower_tool_is_mostly_found_in_independent_workloads(baseline) -> None:
    # Different seeds: different agent runs, so the chance variation of real comparisons. search_kb's
    # durations are uniform over 20-800 ms, so 30% over ~80 calls a side is found in most draws, not all.
    found = []
    for seed in (2, 3, 4, 5):
        candidate = generated(50, seed=seed, tool="search_kb", factor=1.3)
        row = find(compare_runs(baseline, candidate).table, "operation", "duration_ms", operation="search_kb")
        assert row["mean_change"] > 0.10
        found.append(row["verdict"] == Verdict.REGRESSION.value and row["p_value"] < 0.05)
    assert found == [False, True, True, True]


def test_same_workload_with_the_slower_tool_shows_exactly_the_slowdown(baseline) -> None:
    candidate = generated(50, seed=1, tool="search_kb", factor=1.3)
    comparison = compare_runs(baseline, candidate)
    row = find(comparison.table, "operation", "duration_ms", category="tool", operation="search_kb")
    assert row["mean_change"] == pytest.approx(0.3, abs=1e-6)
    assert row["median_change"] == pytest.approx(0.3, abs=1e-6)
    assert row["verdict"] == Verdict.REGRESSION.value
    # Other tools were not touched.
    other = find(comparison.table, "operation", "duration_ms", category="tool", operation="calculator")
    assert other["verdict"] == Verdict.UNCHANGED.value and other["p_value"] == 1.0


def test_a_faster_tool_is_an_improvement_not_a_regression(baseline) -> None:
    candidate = generated(50, seed=1, tool="run_sql", factor=0.6)
    comparison = compare_runs(baseline, candidate)
    row = find(comparison.table, "operation", "duration_ms", category="tool", operation="run_sql")
    assert row["verdict"] == Verdict.IMPROVEMENT.value
    assert row["mean_change"] == pytest.approx(-0.4, abs=1e-6)
    assert not (comparison.regressions["operation"] == "run_sql").any()
    assert len(comparison.improvements) >= 1


def test_threshold_alpha_center_and_min_samples(baseline) -> None:
    candidate = generated(50, seed=1, tool="search_kb", factor=1.3)
    lenient = compare_runs(baseline, candidate, threshold=0.5)
    row = find(lenient.table, "operation", "duration_ms", category="tool", operation="search_kb")
    assert row["verdict"] == Verdict.UNCHANGED.value  # 30% is below a 50% threshold
    by_median = compare_runs(baseline, candidate, center="median")
    assert find(by_median.table, "operation", "duration_ms", category="tool", operation="search_kb")["verdict"] == (
        Verdict.REGRESSION.value
    )
    picky = compare_runs(baseline, candidate, min_samples=10_000)
    assert set(picky.table["verdict"]) == {Verdict.INSUFFICIENT_DATA.value}
    assert picky.exit_code == 0
    # Holm over all ~160 rows: p = 0.005 becomes 0.83, so the verdict follows the adjusted p.
    holm = compare_runs(baseline, candidate, p_adjust="holm")
    assert (holm.table["p_adjusted"] >= holm.table["p_value"]).all()
    row = find(holm.table, "operation", "duration_ms", category="tool", operation="search_kb")
    assert row["p_value"] < 0.05 < row["p_adjusted"]
    assert row["verdict"] == Verdict.UNCHANGED.value
    with pytest.raises(ValueError):
        compare_runs(baseline, candidate, center="mode")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compare_runs(baseline, candidate, levels=["everything"])


def test_rows_levels_and_determinism(baseline) -> None:
    candidate = generated(50, seed=2)
    first = compare_runs(baseline, candidate)
    pd.testing.assert_frame_equal(first.table, compare_runs(baseline, candidate).table)
    # Span tables give the same answer as profiles.
    pd.testing.assert_frame_equal(first.table, compare_runs(span_table(baseline), span_table(candidate)).table)
    table = first.table
    assert list(table.columns) == [
        "level",
        "category",
        "operation",
        "sample",
        "metric",
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
        "p_adjusted",
        "cliffs_delta",
        "verdict",
    ]
    assert list(dict.fromkeys(table["level"])) == ["run", "category", "operation"]
    run = find(table, "run", "duration_ms", sample="trace")
    assert (run["baseline_n"], run["candidate_n"]) == (50, 50)
    assert run["baseline_mean"] == pytest.approx(np.mean([p.duration_ns / 1e6 for p in baseline]))
    # Per-trace totals count runs without such calls as 0, so n is the number of runs.
    calls = find(table, "operation", "calls", sample="trace", category="tool", operation="search_kb")
    assert (calls["baseline_n"], calls["candidate_n"]) == (50, 50)
    # Tools have no tokens: no token rows for them.
    tool_rows = table[(table["category"] == "tool").fillna(False)]
    assert "total_tokens" not in set(tool_rows["metric"])


def test_hand_built_sets_exact_means_and_test() -> None:
    def run(trace_id: str, start_ms: int, tool_ms: int):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        start = EPOCH + start_ms * 1_000_000
        return [
            span("root", None, start, start + 1000 * 1_000_000, trace_id=trace_id),
            span("T", "root", start, start + tool_ms * 1_000_000, CLIENT, trace_id=trace_id, attributes=attributes),
        ]

    durations_before = [100, 110, 120, 130, 140]
    durations_after = [150, 160, 170, 180, 190]
    base = profile_records(r for i, d in enumerate(durations_before) for r in run(f"{i + 1:032x}", 2000 * i, d))
    cand = profile_records(r for i, d in enumerate(durations_after) for r in run(f"{i + 11:032x}", 2000 * i, d))
    comparison = compare_runs(base, cand)
    row = find(comparison.table, "operation", "duration_ms", category="tool", operation="search")
    assert (row["baseline_mean"], row["candidate_mean"]) == (120.0, 170.0)
    assert (row["baseline_median"], row["candidate_median"]) == (120.0, 170.0)
    assert row["mean_change"] == pytest.approx(50 / 120)
    assert row["u"] == 25.0 and row["cliffs_delta"] == 1.0
    assert row["p_value"] == pytest.approx(KNOWN[0][3], rel=1e-12)  # the same ranks as 1..5 against 6..10
    assert row["verdict"] == Verdict.REGRESSION.value
    assert TRACE_ID not in set(span_table(base)["trace_id"])


def test_the_summary_writes_durations_and_costs_as_the_reports_do() -> None:
    from otel_agent_profiler.analytics.compare import _value

    assert _value("duration_ms", 1710.0) == "1.71 s"
    assert _value("cost_usd", 0.0126) == "$0.0126"
    assert _value("total_tokens", 51535.0) == "51,535"
    assert _value("total_tokens", 412.5) == "412.5"


def test_the_summary_names_each_regression_in_words_and_explains_its_statistics(baseline) -> None:
    candidate = generated(50, seed=1, tool="search_kb", factor=1.3)
    lines = compare_runs(baseline, candidate).summary().splitlines()
    assert lines[0].endswith("worse by more than 10% on the mean with p < 0.05:")
    regressions = [line for line in lines[1:] if not line.startswith(("  (", "   "))]
    assert regressions and all(
        re.match(r"  \S.*, [a-z -]+ per (call|run): .* -> .*, p = ", line) for line in regressions
    )
    # The table's column names are not words a reader should have to decode.
    summary = "\n".join(lines)
    assert not re.search(r"\[(span|trace)\]|_ms\b|total_tokens", summary)
    assert "(p: how likely a difference this large is" in summary and "Cliff's delta: how much more" in summary


def test_the_compared_columns_compare_as_the_whole_table(baseline) -> None:
    from otel_agent_profiler.analytics.compare import COMPARED_COLUMNS

    candidate = generated(50, seed=1, tool="search_kb", factor=1.3)
    whole = compare_runs(span_table(baseline), span_table(candidate))
    narrow = compare_runs(
        span_table(baseline, columns=COMPARED_COLUMNS), span_table(candidate, columns=COMPARED_COLUMNS)
    )
    assert whole.has_regression  # the comparison has something to find
    pd.testing.assert_frame_equal(narrow.table, whole.table, check_exact=True)
