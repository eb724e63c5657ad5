"""``find_all(..., for_summary=True)``: the findings a summary across traces reads, without the wording it
does not. Whatever a summary reads must be what ``find_all`` gives, in the same order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from otel_agent_profiler.core import TraceProfile
from otel_agent_profiler.core.findings import (
    BOTTLENECK,
    BUDGET_EXCEEDED,
    BY_KIND,
    PARALLELIZABLE,
    REGISTRY,
    SEQUENTIAL_LLM_CHAIN,
    Finding,
    FindingOptions,
    find_all,
)
from otel_agent_profiler.report.cross_trace import _subject
from tests.core.test_finding_registry import EVERY_KIND_OPTIONS
from tests.core.test_findings import CHAIN, PROMPTS, REPEAT, SLOW, SUPPORT, TOKENS, TRAVEL, agent, llm, tool
from tests.core.test_projection import span_trees
from tests.support.span_builders import profile

_OPTIONS = EVERY_KIND_OPTIONS

# Two agents of two LLM calls each, all four as long and of four models: bottlenecks with one saving,
# and two chains (saving nothing). ``rank`` orders each of those by their titles, so the summary must
# word them.
TIED = [
    agent("root", None, 0, 1000),
    agent("a", "root", 0, 500),
    llm("a1", "a", 0, 250, model="gpt-4o"),
    llm("a2", "a", 250, 500, model="gpt-4o-mini"),
    agent("b", "root", 500, 1000),
    llm("b1", "b", 500, 750, model="o3"),
    llm("b2", "b", 750, 1000, model="o3-mini"),
]

# Two agents that each run two tools one after another: two parallelizable groups of one saving.
TIED_PARALLEL = [
    agent("root", None, 0, 1000),
    agent("a", "root", 0, 500),
    tool("w1", "a", 0, 300, "get_weather"),
    tool("c1", "a", 300, 500, "get_time"),
    agent("b", "root", 500, 1000),
    tool("w2", "b", 500, 800, "get_weather"),
    tool("c2", "b", 800, 1000, "get_time"),
]


def _read_by_the_summary(finding: Finding) -> tuple[object, ...]:
    if finding.kind == BUDGET_EXCEEDED:
        return (finding.to_dict(),)  # kept whole
    return (
        finding.kind,
        finding.saving_ns,
        finding.operation,
        finding.category,
        _subject(finding),
        finding.rests_on,
        finding.suggestion,
        finding.span_ids,
    )


def _same_for_the_summary(trace: TraceProfile, options: FindingOptions) -> list[Finding]:
    summarised = find_all(trace, options, for_summary=True)
    assert [_read_by_the_summary(f) for f in summarised] == [_read_by_the_summary(f) for f in find_all(trace, options)]
    return summarised


@pytest.mark.parametrize("options", [FindingOptions(), _OPTIONS], ids=["default", "every kind"])
@pytest.mark.parametrize("spans", [SUPPORT, SLOW, PROMPTS, REPEAT, CHAIN, TRAVEL, TOKENS, TIED, TIED_PARALLEL])
def test_a_summary_reads_what_find_all_finds(spans: list, options: FindingOptions) -> None:
    _same_for_the_summary(profile(spans), options)


def test_findings_that_tie_on_their_saving_are_worded_for_the_ranking() -> None:
    summarised = _same_for_the_summary(profile(TIED), _OPTIONS)
    tied = [f for f in summarised if f.kind in (BOTTLENECK, SEQUENTIAL_LLM_CHAIN)]
    assert [f.kind for f in tied] == [BOTTLENECK] * 3 + [SEQUENTIAL_LLM_CHAIN] * 2
    assert all(f.title for f in tied)


def test_parallelizable_groups_that_tie_on_their_saving_are_worded_for_the_ranking() -> None:
    summarised = _same_for_the_summary(profile(TIED_PARALLEL), _OPTIONS)
    tied = [f for f in summarised if f.kind == PARALLELIZABLE]
    assert len(tied) == 2 and tied[0].saving_ns == tied[1].saving_ns > 0
    assert all(f.title for f in tied)


def test_a_finding_without_a_tie_is_left_unworded() -> None:
    (chain,) = [f for f in find_all(profile(CHAIN), for_summary=True) if f.kind == SEQUENTIAL_LLM_CHAIN]
    assert chain.title == "" and chain.evidence == {}
    (group,) = [f for f in find_all(profile(TRAVEL), for_summary=True) if f.kind == PARALLELIZABLE]
    assert group.title == "" and group.evidence == {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_trees(messy=True))
def test_a_summary_reads_what_find_all_finds_in_any_trace(records: list) -> None:
    _same_for_the_summary(profile(records), FindingOptions(min_saving=0.0))


@pytest.mark.parametrize("spans", [SUPPORT, SLOW, PROMPTS, REPEAT, CHAIN, TRAVEL, TOKENS, TIED, TIED_PARALLEL])
def test_each_summary_finder_finds_only_kinds_registered_with_it(spans: list) -> None:
    trace = profile(spans)
    for record in REGISTRY:
        if record.summary_finder is None:
            continue
        for finding in record.summary_finder(trace, _OPTIONS):
            assert BY_KIND[finding.kind].summary_finder is record.summary_finder
