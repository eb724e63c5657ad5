"""The critical path: the chain of spans that decided when each root span finished.

The walk follows Jaeger UI's algorithm, with two changes that make it exact:

* a child is eligible when it ends at or before the cursor (``<=``, not ``<``), so a child
  that ends exactly when its next sibling starts is still on the path;
* ties are broken explicitly: latest end, then earliest start (the longer child), then the
  lowest span id, so the result does not depend on the order spans arrived in.

It is iterative (no recursion limit) and each root's path sections tile its duration exactly.

The time the walk credits to a parent is not always its own code: when a child starts while an
earlier one is still running (A from 0 to 500 ms, B from 400 ms), the walk goes from B's start to
the parent's start without entering A, and credits those 400 ms to the parent although A ran
through them. That part is also kept as the parent's ``critical_path_waiting_ns``, so nobody
blames the parent's code for time only a gap between its children holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from .profile import SpanProfile
from .records import SpanKind

# Sorted in walk preference by plain tuple order: latest end first (hence the negated end),
# then earliest start, then lowest span id, which is unique, so the child is never compared.
_Candidate = tuple[int, int, str, SpanProfile]  # -clipped end, clipped start, span id, child


class _Frame:
    """One span being walked: where its interval starts, the cursor, and its candidates
    (eligible children sorted by walk preference) with the position of the next one."""

    __slots__ = ("candidates", "cursor", "earliest_skipped_start", "next_index", "span", "start")

    def __init__(self, span: SpanProfile, start: int, end: int, candidates: list[_Candidate]) -> None:
        self.span = span
        self.start = start
        self.cursor = end
        self.candidates = candidates
        self.next_index = 0
        # The earliest start of the children passed over because they end after the cursor. The
        # cursor only moves back, so every one of them ends after every later cursor: from this
        # start on, some child was running throughout any time credited to the span itself.
        self.earliest_skipped_start = end


_NO_CANDIDATES: list[_Candidate] = []

# An enum member read as a module global: ``SpanKind.X`` goes through the enum's class each time, several
# times slower, and these are read for every span with children.
_PRODUCER = SpanKind.PRODUCER
_CONSUMER = SpanKind.CONSUMER


def _eligible_children(span: SpanProfile, start: int, end: int) -> list[_Candidate]:
    producer = span.record.kind is _PRODUCER
    eligible: list[_Candidate] = []
    for child in span.children:
        child_start, child_end = child.start_ns, child.end_ns
        # Entirely outside the parent's interval: the parent did not wait for it.
        if child_start >= end or child_end <= start:
            continue
        # A producer does not wait for the consumer of its message.
        if producer and child.record.kind is _CONSUMER:
            continue
        eligible.append(
            (
                -(child_end if child_end < end else end),
                child_start if child_start > start else start,
                child.record.span_id,
                child,
            )
        )
    eligible.sort()
    return eligible


def walk_critical_path(root: SpanProfile) -> None:
    """Credit ``critical_path_ns`` to every span on the critical path below ``root``."""
    start, end = root.start_ns, root.end_ns
    root.on_critical_path = True
    stack = [_Frame(root, start, end, _eligible_children(root, start, end) if root.children else _NO_CANDIDATES)]
    while stack:
        frame = stack[-1]
        candidates = frame.candidates
        cursor = frame.cursor
        index = frame.next_index
        chosen = None
        skipped_start = frame.earliest_skipped_start
        while index < len(candidates):
            candidate = candidates[index]
            index += 1
            # Candidates are sorted by end, descending: one ending after the cursor now ends
            # after every later cursor too, so skipping it for good is correct.
            if -candidate[0] <= cursor:
                chosen = candidate
                break
            if candidate[1] < skipped_start:
                skipped_start = candidate[1]
        frame.earliest_skipped_start = skipped_start
        gap_start = frame.start if chosen is None else -chosen[0]
        span = frame.span
        span.critical_path_ns += cursor - gap_start
        if skipped_start < cursor:
            span.critical_path_waiting_ns += cursor - (skipped_start if skipped_start > gap_start else gap_start)
        if chosen is None:
            stack.pop()
            continue
        negated_end, child_start, _, child = chosen
        child_end = -negated_end
        frame.cursor = child_start
        frame.next_index = index
        child.on_critical_path = True
        child_candidates = _eligible_children(child, child_start, child_end) if child.children else _NO_CANDIDATES
        if not child_candidates:
            # Nothing below the child to walk (most spans are leaves): its whole interval is its own,
            # as its frame would find, without making one.
            child.critical_path_ns += child_end - child_start
        elif len(child_candidates) == 1 and not child_candidates[0][3].children:
            # One leaf below it (a call's request, a tool's query: most spans with children). Its frame
            # would take the leaf, which ends by the child's end and starts after its start, and credit
            # the child the time after and before it, with no time waiting: done here without the frame.
            negated_leaf_end, leaf_start, _, leaf = child_candidates[0]
            leaf.on_critical_path = True
            leaf.critical_path_ns += -negated_leaf_end - leaf_start
            child.critical_path_ns += (child_end + negated_leaf_end) + (leaf_start - child_start)
        else:
            stack.append(_Frame(child, child_start, child_end, child_candidates))


def assign_critical_path(roots: Iterable[SpanProfile]) -> None:
    for root in roots:
        walk_critical_path(root)
