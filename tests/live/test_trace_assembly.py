"""``TraceAssembly``: holds the spans of traces until each is complete, within its caps.

Two configurations, the two its users run: the SDK processor's (a trace completes when its local
root ended and no span is open, or after a timeout; the trace cap evicts the oldest trace, the span
cap releases the whole trace) and serve's (a trace completes once quiet; the caps refuse the new
span). Spans are opaque, so these tests use plain strings as spans. Every ended span must come
back out exactly once: in a complete trace, an expired or flushed one, or a pass-through group
(pushed out by a cap, or late). Nothing is ever dropped.
"""

from __future__ import annotations

import random
import threading
from collections import Counter, deque
from typing import Any

import pytest

from otel_agent_profiler.live.trace_assembly import (
    EVICT_OLDEST,
    LATE,
    MAX_QUEUED,
    MEMORY_CAP,
    OPEN_SPAN_BYTES,
    REFUSE_NEW,
    REFUSE_SPAN,
    RELEASE_TRACE,
    SPAN_CAP,
    TRACE_CAP,
    TraceAssembly,
    TraceState,
    UnprofiledSpans,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def processor_assembly(
    max_traces: int = 100, max_spans: int = 1000, timeout_s: float = 60.0, clock: FakeClock | None = None
) -> TraceAssembly[str]:
    """Configured as the SDK processor configures it."""
    return TraceAssembly(
        max_traces,
        max_spans,
        idle_timeout_s=timeout_s,
        max_age_s=timeout_s,
        complete_at_local_root=True,
        at_trace_cap=EVICT_OLDEST,
        at_span_cap=RELEASE_TRACE,
        clock=clock or FakeClock(),
    )


def make_buffer(
    max_traces: int = 100, max_spans: int = 1000, timeout_s: float = 60.0
) -> tuple[TraceAssembly[str], FakeClock]:
    clock = FakeClock()
    return processor_assembly(max_traces, max_spans, timeout_s, clock), clock


def serve_assembly(
    quiet_period_s: float = 5.0,
    max_traces: int = 1000,
    max_spans_per_trace: int = 10_000,
    clock: FakeClock | None = None,
    remembered_traces: int | None = None,
) -> TraceAssembly[Any]:
    """Configured as serve configures it."""
    return TraceAssembly(
        max_traces,
        max_spans_per_trace,
        idle_timeout_s=quiet_period_s,
        complete_at_local_root=False,
        at_trace_cap=REFUSE_NEW,
        at_span_cap=REFUSE_SPAN,
        remembered_traces=remembered_traces,
        clock=clock or FakeClock(),
    )


def spans_of(states: list[TraceState[str]]) -> list[str]:
    return [span for state in states for span in state.spans]


def flatten(groups: list[UnprofiledSpans[str]]) -> list[str]:
    return [span for group in groups for span in group.spans]


# == the SDK processor's configuration ========================================================

# -- completion -----------------------------------------------------------------------------


def test_trace_is_ready_when_local_root_ends_after_its_children() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    assert buffer.span_ended(1, 11, "child", False) == ([], False)
    assert buffer.span_ended(1, 10, "root", True) == ([], True)
    ready = buffer.take_ready()
    assert [state.trace_id for state in ready] == [1]
    assert ready[0].spans == ["child", "root"]
    assert ready[0].local_root_ended
    assert not ready[0].open_span_ids
    assert len(buffer) == 0
    assert buffer.take_ready() == []


def test_trace_is_not_ready_while_a_span_is_open_after_the_root_ended() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_started(1, 12)
    assert buffer.span_ended(1, 10, "root", True) == ([], False)
    assert buffer.span_ended(1, 11, "a", False) == ([], False)
    assert buffer.take_ready() == []
    assert buffer.span_ended(1, 12, "b", False) == ([], True)
    assert spans_of(buffer.take_ready()) == ["root", "a", "b"]


def test_trace_without_its_local_root_is_never_ready() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 11)
    assert buffer.span_ended(1, 11, "child", False) == ([], False)
    assert buffer.take_ready() == []
    assert len(buffer) == 1


def test_span_never_seen_starting_is_still_held() -> None:
    # The profiler may be added while a span is open: its end is the first we hear of it.
    buffer, _ = make_buffer()
    assert buffer.span_ended(7, 70, "root", True) == ([], True)
    assert spans_of(buffer.take_ready()) == ["root"]


def test_traces_are_independent() -> None:
    buffer, _ = make_buffer()
    for trace_id in (1, 2, 3):
        buffer.span_started(trace_id, trace_id * 10)
    buffer.span_ended(2, 20, "root2", True)
    buffer.span_ended(3, 30, "root3", True)
    assert sorted(state.trace_id for state in buffer.take_ready()) == [2, 3]
    assert len(buffer) == 1
    buffer.span_ended(1, 10, "root1", True)
    assert [state.trace_id for state in buffer.take_ready()] == [1]


def test_several_local_roots_in_one_trace() -> None:
    # Two local roots of one trace (e.g. two requests continuing one remote trace).
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_started(1, 20)
    assert buffer.span_ended(1, 10, "root-a", True) == ([], False)
    assert buffer.span_ended(1, 20, "root-b", True) == ([], True)
    assert spans_of(buffer.take_ready()) == ["root-a", "root-b"]


# -- late spans -----------------------------------------------------------------------------


def test_span_of_a_profiled_trace_passes_through_as_late() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_ended(1, 10, "root", True)
    buffer.take_ready()
    assert buffer.span_started(1, 11) == []
    passthrough, ready = buffer.span_ended(1, 11, "late", False)
    assert not ready
    assert passthrough == [UnprofiledSpans(LATE, ["late"])]
    assert len(buffer) == 0


def test_span_starting_after_the_trace_completed_does_not_make_a_second_trace() -> None:
    # The trace completed (root ended, nothing open) and waits for the worker. A span of it
    # that starts now is late: the trace must still be profiled once, and the late span must
    # come out exactly once, never as a separate trace of its own.
    buffer, clock = make_buffer(timeout_s=60.0)
    buffer.span_started(1, 10)
    assert buffer.span_ended(1, 10, "root", True) == ([], True)
    buffer.span_started(1, 11)
    passthrough, _ = buffer.span_ended(1, 11, "late", False)
    ready = buffer.take_ready()
    assert [state.trace_id for state in ready] == [1]
    clock.now += 3600
    expired = buffer.take_expired()
    rest_ready, rest_incomplete = buffer.take_all()
    assert expired == [] and rest_ready == [] and rest_incomplete == [], "the late span became a second trace"
    assert sorted(spans_of(ready) + flatten(passthrough)) == ["late", "root"]


def test_late_span_of_an_expired_trace_passes_through() -> None:
    buffer, clock = make_buffer(timeout_s=1.0)
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_ended(1, 11, "child", False)
    clock.now += 5
    expired = buffer.take_expired()
    assert spans_of(expired) == ["child"]
    assert not expired[0].local_root_ended
    passthrough, ready = buffer.span_ended(1, 10, "root", True)
    assert (passthrough, ready) == ([UnprofiledSpans(LATE, ["root"])], False)


def test_late_span_of_a_flushed_trace_passes_through() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_ended(1, 11, "child", False)
    ready, incomplete = buffer.take_all()
    assert ready == [] and spans_of(incomplete) == ["child"]
    assert buffer.span_ended(1, 10, "root", True) == ([UnprofiledSpans(LATE, ["root"])], False)


# -- expiry ---------------------------------------------------------------------------------


def test_expiry_is_measured_from_the_traces_first_span_oldest_first() -> None:
    buffer, clock = make_buffer(timeout_s=10.0)
    assert buffer.next_expiry() is None
    buffer.span_started(1, 10)
    clock.now += 4
    buffer.span_started(2, 20)
    assert buffer.next_expiry() == pytest.approx(1010.0)
    clock.now += 5.9  # 9.9 s after trace 1 started
    assert buffer.take_expired() == []
    clock.now += 0.2
    assert [state.trace_id for state in buffer.take_expired()] == [1]
    assert buffer.next_expiry() == pytest.approx(1014.0)
    clock.now += 10
    assert [state.trace_id for state in buffer.take_expired()] == [2]
    assert buffer.next_expiry() is None
    assert len(buffer) == 0


def test_a_trace_that_keeps_producing_spans_expires_at_its_age_and_its_later_spans_are_late() -> None:
    buffer, clock = make_buffer(timeout_s=10.0)
    buffer.span_started(1, 10)
    for step in range(11):  # a span every second: never idle for the timeout
        clock.now += 1
        buffer.span_started(1, 100 + step)
        buffer.span_ended(1, 100 + step, f"step {step}", False)
        if step == 8:
            assert buffer.next_expiry() == pytest.approx(1010.0)
            assert buffer.take_expired() == []
    (state,) = buffer.take_expired()  # 11 s after its first span
    assert state.spans == [f"step {step}" for step in range(11)]
    assert state.open_span_ids == {10}
    assert buffer.next_expiry() is None
    assert buffer.held_bytes == 0 and buffer.held_spans == 0
    assert buffer.span_ended(1, 10, "root", True) == ([UnprofiledSpans(LATE, ["root"])], False)


def test_a_trace_let_go_of_before_its_age_leaves_nothing_behind_for_the_age_check() -> None:
    buffer, clock = make_buffer(timeout_s=10.0)
    buffer.span_started(1, 10)
    buffer.span_ended(1, 10, "root", True)  # complete at once
    assert [state.trace_id for state in buffer.take_ready()] == [1]
    clock.now += 5
    buffer.span_started(2, 20)
    assert buffer.next_expiry() == pytest.approx(1015.0)
    clock.now += 6  # trace 1 would be 11 s old
    assert buffer.take_expired() == []


def test_without_an_age_limit_activity_keeps_a_trace_held() -> None:
    clock = FakeClock()
    buffer = serve_assembly(quiet_period_s=10.0, clock=clock)
    for step in range(30):
        clock.now += 1
        buffer.add(1, f"span {step}")
    assert buffer.take_expired() == []
    clock.now += 10
    assert len(buffer.take_expired()) == 1


def test_expired_trace_keeps_the_spans_that_ended() -> None:
    buffer, clock = make_buffer(timeout_s=60.0)
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_started(1, 12)
    buffer.span_ended(1, 12, "b", False)
    buffer.span_ended(1, 10, "root", True)
    clock.now += 61
    (state,) = buffer.take_expired()
    assert state.spans == ["b", "root"]
    assert state.open_span_ids == {11}
    assert state.local_root_ended


# -- flush ----------------------------------------------------------------------------------


def test_take_all_splits_complete_and_incomplete_traces() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_ended(1, 10, "done", True)
    buffer.span_started(2, 20)
    buffer.span_started(2, 21)
    buffer.span_ended(2, 21, "partial", False)
    buffer.span_started(3, 30)  # nothing ended yet
    ready, incomplete = buffer.take_all()
    assert [s.trace_id for s in ready] == [1]
    assert sorted(s.trace_id for s in incomplete) == [2, 3]
    assert spans_of(incomplete) == ["partial"]
    assert len(buffer) == 0
    assert buffer.take_all() == ([], [])


# -- a flush in the middle of a trace ------------------------------------------------------------


def flush_keeping(buffer: TraceAssembly[str]) -> list[str]:
    """What a flush exports, keeping each span's upper-cased name as the processor keeps its record."""
    exported = []
    for state, spans in buffer.take_for_flush():
        buffer.keep(state, [span.upper() for span in spans])
        exported += spans
    return exported


def test_a_flush_takes_each_ended_span_once_and_the_trace_stays_held() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_ended(1, 11, "first", False, size=300)
    assert flush_keeping(buffer) == ["first"]
    assert flush_keeping(buffer) == []
    assert (len(buffer), buffer.held_bytes) == (1, 300 + OPEN_SPAN_BYTES)
    buffer.span_started(1, 12)
    buffer.span_ended(1, 12, "second", False, size=200)
    assert flush_keeping(buffer) == ["second"]
    buffer.span_ended(1, 10, "root", True, size=100)
    (state,) = buffer.take_ready()
    # The trace is whole: what was kept of the spans exported early, then the spans still held.
    assert (state.kept, state.spans, state.exported_early) == (["FIRST", "SECOND"], ["root"], 2)
    assert (len(buffer), buffer.held_bytes, buffer.held_spans) == (0, 0, 0)
    # Nothing is taken twice, and a complete trace is not taken by a flush.
    buffer.span_started(2, 20)
    buffer.span_ended(2, 20, "done", True)
    assert flush_keeping(buffer) == []
    assert spans_of(buffer.take_ready()) == ["done"]


def test_a_flush_only_visits_traces_with_spans_that_ended_since() -> None:
    buffer, _ = make_buffer()
    for trace_id in range(50):
        buffer.span_started(trace_id, trace_id * 10)
        buffer.span_ended(trace_id, trace_id * 10 + 1, f"t{trace_id}", False)
    assert len(buffer.take_for_flush()) == 50
    buffer.span_ended(7, 71, "again", False)
    assert [(state.trace_id, spans) for state, spans in buffer.take_for_flush()] == [(7, ["again"])]


def test_spans_exported_early_count_toward_the_span_cap() -> None:
    buffer, _ = make_buffer(max_spans=3)
    buffer.span_started(1, 10)
    for span_id in (11, 12):
        buffer.span_started(1, span_id)
        buffer.span_ended(1, span_id, f"s{span_id}", False)
    assert flush_keeping(buffer) == ["s11", "s12"]
    buffer.span_started(1, 13)
    buffer.span_ended(1, 13, "s13", False)
    pushed, ready = buffer.span_ended(1, 14, "s14", False)
    assert (pushed, ready) == ([UnprofiledSpans(SPAN_CAP, ["s13", "s14"], exported_early=2)], False)
    assert pushed[0].counted == 4
    assert (len(buffer), buffer.held_bytes, buffer.held_spans) == (0, 0, 0)


def test_a_trace_pushed_out_after_an_early_export_says_how_many_went_early() -> None:
    buffer, _ = make_buffer(max_traces=1)
    buffer.span_started(1, 10)
    buffer.span_ended(1, 11, "early", False, size=500)
    flush_keeping(buffer)
    assert buffer.span_started(2, 20) == []  # queued: noted by the next call that takes the lock
    evicted = buffer.take_pushed_out()
    assert evicted == [UnprofiledSpans(TRACE_CAP, [], 0, exported_early=1)]
    assert buffer.held_bytes == OPEN_SPAN_BYTES
    # Its later spans follow it out, and a flush no longer sees it.
    assert buffer.span_ended(1, 12, "later", False, size=10)[0] == [UnprofiledSpans(TRACE_CAP, ["later"], 10)]
    assert flush_keeping(buffer) == []


def test_what_is_kept_counts_toward_the_byte_limit() -> None:
    buffer = TraceAssembly[str](
        10, 100, idle_timeout_s=60, complete_at_local_root=True, at_trace_cap=EVICT_OLDEST,
        at_span_cap=RELEASE_TRACE, max_bytes=1000, clock=FakeClock(),
    )  # fmt: skip
    buffer.span_ended(1, 11, "old", False, size=600)
    flush_keeping(buffer)
    pushed, _ = buffer.span_ended(2, 21, "new", False, size=600)
    assert pushed == [UnprofiledSpans(MEMORY_CAP, [], 0, exported_early=1)]
    assert buffer.held_bytes == 600


def test_a_trace_whose_early_spans_could_not_be_kept_is_marked() -> None:
    buffer, _ = make_buffer()
    buffer.span_ended(1, 11, "early", False)
    ((state, _),) = buffer.take_for_flush()
    buffer.keep(state, None)
    buffer.span_ended(1, 10, "root", True)
    (ready,) = buffer.take_ready()
    assert (ready.kept_whole, ready.kept, ready.exported_early, ready.spans) == (False, [], 1, ["root"])


def test_shutdown_after_early_exports_takes_the_trace_with_what_was_kept() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_ended(1, 11, "early", False)
    flush_keeping(buffer)
    buffer.span_ended(1, 12, "held", False)
    ready, incomplete = buffer.take_all()
    assert ready == []
    ((state),) = incomplete
    assert (state.kept, state.spans) == (["EARLY"], ["held"])
    assert flush_keeping(buffer) == []


# -- queued spans -----------------------------------------------------------------------------


def test_a_start_is_queued_and_noted_before_the_next_span_end() -> None:
    buffer, clock = make_buffer(timeout_s=10.0)
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    clock.now += 3
    # The root ends first: its child, queued, is open, so the trace is not complete.
    assert buffer.span_ended(1, 10, "root", True) == ([], False)
    assert buffer.held_bytes == OPEN_SPAN_BYTES
    assert buffer.span_ended(1, 11, "child", False) == ([], True)
    assert spans_of(buffer.take_ready()) == ["root", "child"]


def test_what_noting_starts_pushes_out_comes_back_first_with_the_next_span_end() -> None:
    buffer, _ = make_buffer(max_traces=1)
    buffer.span_started(1, 10)
    buffer.span_ended(1, 11, "t1-child", False)
    buffer.span_started(2, 20)  # queued: the cap is met when it is noted
    pushed, ready = buffer.span_ended(2, 20, "t2-root", True)
    assert (pushed, ready) == ([UnprofiledSpans(TRACE_CAP, ["t1-child"])], True)
    assert buffer.take_pushed_out() == []


def test_a_long_queue_of_starts_is_noted_by_span_started_itself() -> None:
    buffer, _ = make_buffer(max_traces=1)
    buffer.span_ended(1, 11, "t1-child", False)
    evicted: list[UnprofiledSpans[str]] = []
    for span_id in range(MAX_QUEUED):
        evicted += buffer.span_started(2, span_id)
    assert evicted == [UnprofiledSpans(TRACE_CAP, ["t1-child"])]
    assert buffer._queued == deque()


def test_a_queued_end_is_held_when_noted_with_its_size_then() -> None:
    measured: list[str] = []

    def size_of(span: str) -> int:
        measured.append(span)
        return 700

    buffer = TraceAssembly[str](
        10, 100, idle_timeout_s=60, complete_at_local_root=True, at_trace_cap=EVICT_OLDEST,
        at_span_cap=RELEASE_TRACE, max_bytes=10_000, clock=FakeClock(), size_of=size_of,
    )  # fmt: skip
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    assert buffer.span_ended_later(1, 11, "child", False) == 3
    assert buffer.span_ended_later(1, 10, "root", True) == 4
    assert measured == []  # nothing measured or held on the queueing thread
    assert spans_of(buffer.take_ready()) == ["child", "root"]
    assert measured == ["child", "root"]
    assert buffer.take_pushed_out() == []


def test_a_queued_end_counts_toward_the_byte_limit_once_noted() -> None:
    buffer = TraceAssembly[str](
        10, 100, idle_timeout_s=60, complete_at_local_root=True, at_trace_cap=EVICT_OLDEST,
        at_span_cap=RELEASE_TRACE, max_bytes=1000, clock=FakeClock(), size_of=lambda span: 600,
    )  # fmt: skip
    buffer.span_ended_later(1, 11, "old", False)
    buffer.span_ended_later(2, 21, "new", False)
    assert buffer.held_bytes == 600  # noted: the older trace made room
    assert buffer.take_pushed_out() == [UnprofiledSpans(MEMORY_CAP, ["old"], 600)]


def test_a_queued_end_of_a_trace_let_go_of_comes_back_when_noted() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_ended(1, 10, "root", True)
    buffer.span_ended_later(1, 11, "late", False)
    assert spans_of(buffer.take_ready()) == ["root"]
    assert buffer.take_pushed_out() == [UnprofiledSpans(LATE, ["late"])]
    assert buffer.counts.late == 1


def test_a_span_of_a_trace_let_go_of_is_refused_at_once() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    assert buffer.refused_now(1, "early") is None  # held: it is queued, not refused
    buffer.span_ended(1, 10, "root", True)
    assert buffer.refused_now(1, "late") == UnprofiledSpans(LATE, ["late"])
    assert buffer.refused_now(2, "other") is None
    assert buffer.counts.late == 1


def test_a_long_queue_of_ends_is_noted_by_the_thread_that_queues() -> None:
    buffer, _ = make_buffer(max_spans=10 * MAX_QUEUED)
    queued = [buffer.span_ended_later(1, span_id, f"s{span_id}", False) for span_id in range(MAX_QUEUED + 5)]
    assert queued[: MAX_QUEUED - 1] == list(range(1, MAX_QUEUED))
    assert queued[MAX_QUEUED - 1] == 0  # the queue's length reached the limit: noted at once
    assert queued[MAX_QUEUED:] == [1, 2, 3, 4, 5]
    assert len(buffer._queued) == 5
    assert buffer.held_spans == MAX_QUEUED


def test_queued_starts_count_as_open_in_a_forked_child() -> None:
    buffer, _ = make_buffer()
    buffer.span_started(1, 10)
    buffer.span_ended(1, 12, "child", False)  # notes 10
    buffer.span_started(1, 11)  # still queued
    buffer.span_started(1, 13)
    buffer.span_ended_later(1, 13, "closed", False)  # queued after its start: it closes it
    assert buffer.open_span_ids_after_fork() == {10, 11}


# -- caps -----------------------------------------------------------------------------------


def test_trace_cap_evicts_the_oldest_trace_with_its_ended_spans() -> None:
    buffer, _ = make_buffer(max_traces=2)
    buffer.span_started(1, 10)
    buffer.span_started(1, 11)
    buffer.span_ended(1, 11, "t1-child", False)
    buffer.span_started(2, 20)
    buffer.span_started(3, 30)
    evicted = buffer.take_pushed_out()
    assert evicted == [UnprofiledSpans(TRACE_CAP, ["t1-child"])]
    assert len(buffer) == 2
    # Later spans of the evicted trace are passed through as evicted, never buffered again.
    assert buffer.span_started(1, 12) == []
    assert buffer.span_ended(1, 12, "t1-late", False) == ([UnprofiledSpans(TRACE_CAP, ["t1-late"])], False)
    assert buffer.span_ended(1, 10, "t1-root", True) == ([UnprofiledSpans(TRACE_CAP, ["t1-root"])], False)
    assert len(buffer) == 2
    # The others are unaffected.
    buffer.span_ended(2, 20, "t2-root", True)
    buffer.span_ended(3, 30, "t3-root", True)
    assert spans_of(buffer.take_ready()) == ["t2-root", "t3-root"]


def test_trace_cap_evicts_a_trace_waiting_to_be_profiled_first() -> None:
    buffer, _ = make_buffer(max_traces=2)
    buffer.span_started(1, 10)
    buffer.span_started(2, 20)
    buffer.span_ended(2, 20, "t2-root", True)  # complete, waiting for the worker
    buffer.span_started(3, 30)
    evicted = buffer.take_pushed_out()
    assert evicted == [UnprofiledSpans(TRACE_CAP, ["t2-root"])]
    assert buffer.take_ready() == []


def test_trace_cap_applies_to_spans_never_seen_starting() -> None:
    buffer, _ = make_buffer(max_traces=1)
    buffer.span_started(1, 11)
    buffer.span_ended(1, 11, "t1-child", False)
    passthrough, ready = buffer.span_ended(2, 20, "t2-root", True)
    assert passthrough == [UnprofiledSpans(TRACE_CAP, ["t1-child"])]
    assert ready
    assert spans_of(buffer.take_ready()) == ["t2-root"]


def test_span_cap_passes_the_whole_trace_through() -> None:
    buffer, _ = make_buffer(max_spans=5)
    buffer.span_started(1, 100)
    for span_id in range(1, 8):
        buffer.span_started(1, span_id)
    out: list[UnprofiledSpans[str]] = []
    for span_id in range(1, 8):
        passthrough, ready = buffer.span_ended(1, span_id, f"s{span_id}", False)
        assert not ready
        out.extend(passthrough)
    passthrough, ready = buffer.span_ended(1, 100, "root", True)
    assert not ready
    out.extend(passthrough)
    assert {group.reason for group in out} == {SPAN_CAP}
    assert flatten(out) == [f"s{i}" for i in range(1, 8)] + ["root"]
    assert buffer.take_all() == ([], [])


def test_span_cap_allows_exactly_the_cap() -> None:
    buffer, _ = make_buffer(max_spans=3)
    for span_id in (1, 2, 3):
        buffer.span_started(1, span_id)
    buffer.span_ended(1, 2, "a", False)
    buffer.span_ended(1, 3, "b", False)
    assert buffer.span_ended(1, 1, "root", True) == ([], True)
    assert spans_of(buffer.take_ready()) == ["a", "b", "root"]


# -- nothing is ever lost -------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(25))
def test_every_ended_span_comes_out_exactly_once(seed: int) -> None:
    rng = random.Random(seed)
    buffer, clock = make_buffer(max_traces=rng.randint(1, 4), max_spans=rng.randint(1, 6), timeout_s=2.0)
    out: list[str] = []
    open_spans: list[tuple[int, int]] = []
    ended: list[str] = []
    next_span = 1
    for _ in range(300):
        action = rng.random()
        if action < 0.4 or not open_spans:
            trace_id = rng.randint(1, 8)
            evicted = buffer.span_started(trace_id, next_span)
            for group in evicted:
                out.extend(group.spans)
            open_spans.append((trace_id, next_span))
            next_span += 1
        elif action < 0.85:
            trace_id, span_id = open_spans.pop(rng.randrange(len(open_spans)))
            name = f"{trace_id}:{span_id}"
            ended.append(name)
            passthrough, _ = buffer.span_ended(trace_id, span_id, name, rng.random() < 0.3)
            out.extend(flatten(passthrough))
        elif action < 0.93:
            out.extend(spans_of(buffer.take_ready()))
            out.extend(flatten(buffer.take_pushed_out()))
        else:
            clock.now += rng.random() * 3
            out.extend(spans_of(buffer.take_expired()))
            out.extend(flatten(buffer.take_pushed_out()))
    ready, incomplete = buffer.take_all()
    out.extend(spans_of(ready) + spans_of(incomplete))
    out.extend(flatten(buffer.take_pushed_out()))
    counts = Counter(out)
    assert sorted(counts) == sorted(ended)
    assert all(count == 1 for count in counts.values()), [name for name, count in counts.items() if count > 1]
    assert len(buffer) == 0


def test_many_threads_lose_no_span() -> None:
    buffer = processor_assembly(max_traces=16, max_spans=50, clock=FakeClock())
    out: list[str] = []
    out_lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(thread: int) -> None:
        barrier.wait()
        local: list[str] = []
        for i in range(200):
            trace_id = thread * 1000 + i
            evicted = buffer.span_started(trace_id, 1)
            for group in evicted:
                local.extend(group.spans)
            for child in (2, 3):
                evicted = buffer.span_started(trace_id, child)
                for group in evicted:
                    local.extend(group.spans)
                passthrough, _ = buffer.span_ended(trace_id, child, f"{trace_id}:{child}", False)
                local.extend(flatten(passthrough))
            passthrough, _ = buffer.span_ended(trace_id, 1, f"{trace_id}:1", True)
            local.extend(flatten(passthrough))
            if i % 7 == 0:
                local.extend(spans_of(buffer.take_ready()))
                local.extend(flatten(buffer.take_pushed_out()))
        with out_lock:
            out.extend(local)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ready, incomplete = buffer.take_all()
    out.extend(spans_of(ready) + spans_of(incomplete))
    out.extend(flatten(buffer.take_pushed_out()))
    counts = Counter(out)
    assert len(counts) == 8 * 200 * 3
    assert set(counts.values()) == {1}
    assert len(buffer) == 0


# == serve's configuration: quiet period, caps and late spans, on a fake clock =================


def test_trace_is_released_after_quiet_period_without_new_spans() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=5, clock=clock)
    assert assembler.add("t1", "a") == []
    clock.now += 4
    assert assembler.add("t1", "b") == []  # a new span restarts the quiet period
    clock.now += 4.9
    assert assembler.take_expired() == []
    assert assembler.next_expiry() == pytest.approx(clock.now + 0.1)
    clock.now += 0.1
    (trace,) = assembler.take_expired()
    assert trace.trace_id == "t1" and trace.spans == ["a", "b"]
    assert assembler.held_spans == 0 and assembler.held_traces == 0
    assert assembler.next_expiry() is None


def test_traces_are_released_independently_in_order_of_activity() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=1, clock=clock)
    assembler.add("t1", "a")
    clock.now += 0.5
    assembler.add("t2", "b")
    clock.now += 0.2
    assembler.add("t1", "c")  # t1 is now the more recently active one
    clock.now += 0.8
    assert [t.trace_id for t in assembler.take_expired()] == ["t2"]
    clock.now += 0.2
    assert [t.trace_id for t in assembler.take_expired()] == ["t1"]


def test_late_spans_of_a_released_trace_are_refused_and_counted() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=1, clock=clock)
    assembler.add("t1", "a")
    clock.now += 1
    assert len(assembler.take_expired()) == 1
    assert assembler.add("t1", "late") == [UnprofiledSpans(LATE, ["late"])]
    assert assembler.counts.late == 1
    assert assembler.held_spans == 0
    # Traces released at shutdown count the same way.
    assembler.add("t2", "b")
    ready, incomplete = assembler.take_all()
    assert ready == [] and len(incomplete) == 1
    assert assembler.add("t2", "c") == [UnprofiledSpans(LATE, ["c"])]
    assert assembler.counts.late == 2


def test_trace_cap_refuses_spans_of_new_traces_but_not_of_held_ones() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=1, max_traces=2, clock=clock)
    assert assembler.add("t1", "a") == []
    assert assembler.add("t2", "b") == []
    assert assembler.full
    assert assembler.add("t3", "c") == [UnprofiledSpans(TRACE_CAP, ["c"])]
    assert assembler.add("t1", "d") == []
    assert assembler.counts.over_trace_cap == 1 and assembler.counts.over_caps == 1
    clock.now += 1
    assert len(assembler.take_expired()) == 2
    assert assembler.add("t3", "e") == []  # room again; t3 was never held, so it is not late


def test_span_cap_refuses_spans_past_the_limit_of_one_trace() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=1, max_spans_per_trace=3, clock=clock)
    results = [assembler.add("t1", i) for i in range(5)]
    assert results == [[], [], [], [UnprofiledSpans(SPAN_CAP, [3])], [UnprofiledSpans(SPAN_CAP, [4])]]
    assert assembler.counts.over_span_cap == 2 and assembler.counts.over_caps == 2
    assert assembler.held_spans == 3
    clock.now += 1
    (trace,) = assembler.take_expired()
    assert trace.spans == [0, 1, 2]


def test_remembered_trace_ids_are_bounded() -> None:
    clock = FakeClock()
    assembler = serve_assembly(quiet_period_s=0, clock=clock, remembered_traces=2)
    for trace_id in ("t1", "t2", "t3"):
        assembler.add(trace_id, "x")
        assembler.take_expired()
    assert assembler.add("t1", "x") == []  # forgotten: held again rather than called late
    assert assembler.add("t3", "x") == [UnprofiledSpans(LATE, ["x"])]


@pytest.mark.parametrize("kwargs", [{"quiet_period_s": -1}, {"max_traces": 0}, {"max_spans_per_trace": 0}])
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        serve_assembly(**kwargs)  # type: ignore[arg-type]


def test_a_byte_limit_needs_the_oldest_traces_to_make_room() -> None:
    with pytest.raises(ValueError, match="EVICT_OLDEST"):
        TraceAssembly(
            10, 10, idle_timeout_s=1, complete_at_local_root=False, at_trace_cap=REFUSE_NEW,
            at_span_cap=REFUSE_SPAN, max_bytes=1000,
        )  # fmt: skip


def test_a_trace_active_past_its_maximum_age_is_taken_with_what_it_has() -> None:
    clock = FakeClock()
    assembly: TraceAssembly[str] = TraceAssembly(
        100,
        1000,
        idle_timeout_s=5.0,
        complete_at_local_root=False,
        at_trace_cap=REFUSE_NEW,
        at_span_cap=REFUSE_SPAN,
        clock=clock,
        max_age_s=60.0,
    )
    assembly.add("long", "first")
    assembly.add("short", "other")
    assert assembly.next_expiry() == clock.now + 5.0
    for i in range(29):  # a span every 2 s: never quiet for 5 s
        clock.now += 2.0
        assembly.add("long", f"span{i}")
        if i == 2:  # "short" went quiet; "long" did not
            assert [state.trace_id for state in assembly.take_expired()] == ["short"]
        assert assembly.take_aged() == []
    assert (clock.now, assembly.next_expiry()) == (1058.0, 1060.0)  # its age comes before its quiet period
    clock.now = 1060.0
    aged = assembly.take_aged()  # serve takes these first: take_expired would take them as quiet traces
    assert assembly.take_expired() == []
    assert spans_of(aged) == ["first"] + [f"span{i}" for i in range(29)]
    assert flatten(assembly.add("long", "later")) == ["later"]  # its later spans are late
    assert assembly.counts.late == 1 and assembly.held_spans == 0


def test_without_a_maximum_age_nothing_is_taken_for_its_age() -> None:
    clock = FakeClock()
    assembly = serve_assembly(quiet_period_s=5.0, clock=clock)  # configured without a maximum age
    assembly.add("t", "a")
    clock.now += 10_000.0
    assert assembly.take_aged() == []
    with pytest.raises(ValueError):
        TraceAssembly(
            1,
            1,
            idle_timeout_s=1.0,
            complete_at_local_root=False,
            at_trace_cap=REFUSE_NEW,
            at_span_cap=REFUSE_SPAN,
            max_age_s=0.0,
        )
