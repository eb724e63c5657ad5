"""``report``: what the main process keeps of the findings of traces the page does not detail."""

from __future__ import annotations

from otel_agent_profiler.cli import budgets
from otel_agent_profiler.cli.report import _kept_for_the_table
from otel_agent_profiler.core.findings import BUDGET_EXCEEDED, find_all
from otel_agent_profiler.offline import load_profiles
from otel_agent_profiler.report.html import largest_saving
from tests.support.paths import DATA


def test_the_findings_kept_give_the_table_and_the_budgets_what_all_of_them_give() -> None:
    # With summary JSON, the workers send back of a trace the page does not detail only what the
    # traces table (its largest saving) and the budget lines read.
    profiles = load_profiles([str(DATA / "demo_trace.otlp.json")]).profiles
    options = budgets.finding_options(0.0, [budgets.budget("duration=1ms")], None)
    shrunk = 0
    for profile in profiles:
        found = find_all(profile, options)
        kept = _kept_for_the_table(found)
        assert largest_saving(kept) == largest_saving(found)
        assert [f for f in kept if f.kind == BUDGET_EXCEEDED] == [f for f in found if f.kind == BUDGET_EXCEEDED]
        assert any(f.kind == BUDGET_EXCEEDED for f in kept)
        shrunk += len(found) - len(kept)
    assert shrunk > 0, "every finding was kept: the test shows nothing"
