"""Property tests over random span trees.

The generated traces have random parent links (mostly to earlier spans, sometimes to any span
so cycles and self-parents occur, sometimes to a span that is not in the data), random small
integer intervals (overlaps, ties, zero lengths, children partly or wholly outside their
parents, the odd unended or negative-duration span), all five span kinds (PRODUCER and
CONSUMER often) and a few GenAI attribute sets so categories and LLM counting are exercised.
"""

from __future__ import annotations

from dataclasses import astuple

from hypothesis import HealthCheck, given, settings, strategies as st

from otel_agent_profiler.core import SpanRecord, TraceProfile, profile_records
from tests.support.span_builders import CLIENT, CONSUMER, INTERNAL, PRODUCER, SERVER, sid, span, subtree

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,  # do not write a .hypothesis directory into the project
    suppress_health_check=[HealthCheck.too_slow],
)

KINDS = [INTERNAL, PRODUCER, CONSUMER, PRODUCER, CONSUMER, CLIENT, SERVER]
ATTRIBUTE_SETS: list[dict[str, object]] = [
    {},
    {},
    {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x"},
    {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
    },
    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    {"openinference.span.kind": "RETRIEVER"},
]


@st.composite
def span_trees(draw, max_spans: int = 25, messy: bool = True) -> list[SpanRecord]:
    """A list of span records of one trace with unique span ids (named by integers)."""
    count = draw(st.integers(min_value=1, max_value=max_spans))
    records: list[SpanRecord] = []
    intervals: list[tuple[int, int]] = []
    for i in range(count):
        link = draw(st.integers(min_value=0, max_value=19))
        parent: int | None
        if i == 0 or link < 2:
            parent = None
        elif link < 16 or not messy:
            parent = draw(st.integers(min_value=0, max_value=i - 1))
        elif link < 18:
            parent = draw(st.integers(min_value=0, max_value=count - 1))  # may close a cycle
        else:
            parent = 1_000 + i  # not in the data

        if parent is not None and parent < i and draw(st.booleans()):
            # Inside (or touching the edges of) an earlier parent's interval.
            p_start, p_end = intervals[parent]
            start = draw(st.integers(min_value=p_start, max_value=p_end))
            end = draw(st.integers(min_value=start, max_value=p_end))
        else:
            start = draw(st.integers(min_value=0, max_value=60))
            end = start + draw(st.integers(min_value=0, max_value=40))
        intervals.append((start, end))

        recorded_end: int | None = end
        if messy:
            oddity = draw(st.integers(min_value=0, max_value=29))
            if oddity == 0:
                recorded_end = None
            elif oddity == 1:
                recorded_end = start - draw(st.integers(min_value=1, max_value=10))
        records.append(
            span(
                i,
                parent,
                start,
                recorded_end,
                draw(st.sampled_from(KINDS)),
                attributes=draw(st.sampled_from(ATTRIBUTE_SETS)),
            )
        )
    return records


@st.composite
def span_trees_and_permutations(draw) -> tuple[list[SpanRecord], list[SpanRecord]]:
    records = draw(span_trees())
    return records, draw(st.permutations(records))


def profile_one(records: list[SpanRecord]) -> TraceProfile:
    (trace,) = profile_records(records)
    return trace


# --- reference implementations, written straight from the spec ------------------------------


def reference_self_time(node) -> int:
    """Count the nanoseconds of the span that no direct child (clipped) covers."""
    start, end = node.start_ns, node.end_ns
    clipped = [(max(c.start_ns, start), min(c.end_ns, end)) for c in node.children]
    return sum(1 for t in range(start, end) if not any(s <= t < e for s, e in clipped))


def reference_critical_path(trace: TraceProfile) -> dict[str, tuple[int, bool]]:
    """Recursive, quadratic walk of the spec's critical path over the assembled tree."""
    credit = {node.span_id: 0 for node in trace.spans}
    entered: set[str] = set()

    def walk(node, start: int, end: int) -> None:
        entered.add(node.span_id)
        producer = node.record.kind is PRODUCER
        children = []
        for child in node.children:
            if child.start_ns >= end or child.end_ns <= start:
                continue
            if producer and child.record.kind is CONSUMER:
                continue
            children.append((max(child.start_ns, start), min(child.end_ns, end), child.span_id, child))
        used: set[str] = set()
        cursor = end
        while True:
            eligible = [c for c in children if c[2] not in used and c[1] <= cursor]
            if not eligible:
                credit[node.span_id] += cursor - start
                return
            c_start, c_end, c_id, child = min(eligible, key=lambda c: (-c[1], c[0], c[2]))
            used.add(c_id)
            credit[node.span_id] += cursor - c_end
            walk(child, c_start, c_end)
            cursor = c_start

    for root in trace.roots:
        walk(root, root.start_ns, root.end_ns)
    return {span_id: (credit[span_id], span_id in entered) for span_id in credit}


def snapshot(trace: TraceProfile):
    """Everything the results say, keyed by span id, plus the trace totals."""
    spans = {
        node.span_id: (
            node.self_time_ns,
            node.critical_path_ns,
            node.on_critical_path,
            node.category,
            node.operation,
            node.start_ns,
            node.end_ns,
            node.parent.span_id if node.parent is not None else None,
            node.depth,
            node.counted,
        )
        for node in trace.spans
    }
    totals = (
        trace.trace_id,
        trace.start_ns,
        trace.end_ns,
        trace.duration_ns,
        trace.critical_path_ns,
        trace.span_count,
        trace.llm_calls,
        astuple(trace.tokens),
        astuple(trace.critical_path_tokens),
        {model: astuple(usage) for model, usage in trace.tokens_by_model.items()},
        {category: astuple(stats) for category, stats in trace.categories.items()},
        {key: (astuple(stats)[:-1], astuple(stats.tokens)) for key, stats in trace.operations.items()},
        [node.span_id for node in trace.spans],
        [root.span_id for root in trace.roots],
        sorted((a.kind, a.span_id, a.detail) for a in trace.anomalies),
    )
    return spans, totals


# --- properties ------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(span_trees())
def test_self_time_is_between_zero_and_duration(records):
    trace = profile_one(records)
    for node in trace.spans:
        assert 0 <= node.self_time_ns <= node.duration_ns
        assert node.self_time_ns == reference_self_time(node)


@PROPERTY_SETTINGS
@given(span_trees())
def test_critical_path_tiles_each_root_exactly(records):
    trace = profile_one(records)
    assert len(trace.spans) == len(records)  # unique ids: nothing lost, cycles included
    for root in trace.roots:
        assert sum(node.critical_path_ns for node in subtree(root)) == root.duration_ns
    assert trace.critical_path_ns == sum(root.duration_ns for root in trace.roots)
    assert sum(len(subtree(root)) for root in trace.roots) == len(trace.spans)


@PROPERTY_SETTINGS
@given(span_trees())
def test_critical_path_time_only_on_spans_the_walk_entered(records):
    trace = profile_one(records)
    for node in trace.spans:
        assert node.critical_path_ns >= 0
        if node.critical_path_ns > 0:
            assert node.on_critical_path
        if node.on_critical_path and node.parent is not None:
            assert node.parent.on_critical_path
    assert all(root.on_critical_path for root in trace.roots)


@PROPERTY_SETTINGS
@given(span_trees())
def test_critical_path_own_code_never_exceeds_self_time(records):
    # The part of a span's critical-path time no child was running in is time its own code ran:
    # it fits in its self time. (A producer's consumer children are not waited for, so its
    # self time leaves their time out while the critical path counts it as the producer's.)
    trace = profile_one(records)
    for node in trace.spans:
        assert 0 <= node.critical_path_waiting_ns <= node.critical_path_ns
        if node.record.kind is not PRODUCER:
            assert node.critical_path_ns - node.critical_path_waiting_ns <= node.self_time_ns


@PROPERTY_SETTINGS
@given(span_trees())
def test_critical_path_matches_reference_walk(records):
    trace = profile_one(records)
    actual = {node.span_id: (node.critical_path_ns, node.on_critical_path) for node in trace.spans}
    assert actual == reference_critical_path(trace)


@PROPERTY_SETTINGS
@given(span_trees_and_permutations())
def test_results_do_not_depend_on_record_order(records_and_permutation):
    records, permuted = records_and_permutation
    assert snapshot(profile_one(permuted)) == snapshot(profile_one(records))


@PROPERTY_SETTINGS
@given(span_trees(messy=False))
def test_clean_trees_have_one_root_per_parentless_span_and_no_anomalies(records):
    trace = profile_one(records)
    assert trace.anomalies == []
    assert {root.span_id for root in trace.roots} == {r.span_id for r in records if r.parent_span_id is None}
    assert sid(0) in {root.span_id for root in trace.roots}
