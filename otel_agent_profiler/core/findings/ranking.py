"""One ranked list of findings per trace, with no saving counted twice, and what they add up to.

Finders look at a trace each from their own angle, so several can be about the same spans: the
three calls of one model are a bottleneck as an operation and each of them as a span. Their
savings overlap and do not add up, so ``rank`` folds them into one finding (the largest saving,
which is the widest scope) and lists the others as its ``details``. It also drops the noise:
savings too small to act on, and findings that save no time and suggest nothing.

``combined_projection`` answers "and if I made every change?": the trace replayed on its tree
with all the changes at once, never a sum of savings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule, projected_duration_scaled_ns
from .base import Evidence, Finding, FindingOptions, _with_descendants
from .kinds import Change
from .registry import BY_KIND, KINDS, REGISTRY
from .rests_on import SHOWN_BY_THE_TRACE

# The factor a bottleneck's or slow tool's spans get in the combined projection: "twice as fast",
# the change their suggestions ask for (removing the time altogether is the upper bound, not a change).
COMBINED_SPEEDUP_FACTOR = 0.5


def _order(finding: Finding) -> tuple[bool, int, int, str, tuple[str, ...]]:
    # Kinds that lead (budget overruns) come first: they save no time themselves, but a report (or
    # a CI run) that exceeds a budget leads with it rather than cutting it off below the savings.
    position = KINDS.index(finding.kind)
    return (not REGISTRY[position].leads, -finding.saving_ns, position, finding.title, finding.span_ids)


def rank(profile: TraceProfile, findings: Sequence[Finding], options: FindingOptions) -> list[Finding]:
    """The findings worth showing, budget overruns first, then the largest saving first, none sharing a
    span with another of its kind.

    Left out: findings saving more than nothing but less than ``options.min_saving`` of the
    trace's duration, and findings saving nothing that carry no ``suggestion``. What-ifs (asked
    for) are always kept. A finding sharing a span with a larger one of the same kind (bottlenecks
    and slow tools count as one kind here) is folded into it: it becomes one of its ``details``.
    """
    floor = options.min_saving * profile.duration_ns
    kept: list[Finding] = []
    claimed: dict[str, dict[str, Finding]] = {}  # family -> span id -> the finding holding it
    for finding in sorted(findings, key=_order):
        kind = BY_KIND[finding.kind]
        noise = 0 < finding.saving_ns < floor or (finding.saving_ns <= 0 and finding.suggestion is None)
        if noise and not kind.always_kept:
            continue
        family = kind.family_kind
        holders = claimed.setdefault(family, {})
        holder = next((holders[i] for i in finding.span_ids if i in holders), None)
        if holder is not None:
            holder.details.append(_detail(finding))
            if holder.caveat is None:
                # What casts doubt on the folded finding's spans casts doubt on the holder's.
                holder.caveat = finding.caveat
            target = holder
        else:
            kept.append(finding)
            target = finding
        for span_id in finding.span_ids:
            holders.setdefault(span_id, target)
    return kept


def _detail(finding: Finding) -> Evidence:
    return {
        "kind": finding.kind,
        "title": finding.title,
        "saving_ns": finding.saving_ns,
        "span_ids": list(finding.span_ids),
    }


@dataclass(frozen=True, slots=True)
class CombinedProjection:
    """The trace's duration if the change of every finding were made together."""

    duration_ns: int
    projected_duration_ns: int
    #: How many findings' changes it includes (bottlenecks and slow tools twice as fast, repeated
    #: tool calls made once, parallelizable calls started together).
    changes: int

    @property
    def saving_ns(self) -> int:
        return self.duration_ns - self.projected_duration_ns

    def to_dict(self) -> Evidence:
        return {
            "duration_ns": self.duration_ns,
            "projected_duration_ns": self.projected_duration_ns,
            "saving_ns": self.saving_ns,
            "changes": self.changes,
        }


def combined_projection(
    profile: TraceProfile, findings: Sequence[Finding], *, schedule: RecordedSchedule | None = None
) -> CombinedProjection:
    """The trace's duration recomputed on its tree with every finding's change made at once.

    The changes: a bottleneck's or slow tool's spans twice as fast, a repeated tool call's repeats
    (and what they called) dropped, a parallelizable group started together. Other kinds (and
    what-ifs, which are questions rather than changes) change nothing. A span changed by several
    findings takes the largest change, never their product. Needs the span tree. ``schedule``: the
    trace's recorded schedule, if already built (by the caller of ``find_all``). Findings that
    rest on an assumption or on estimated times (``Finding.rests_on``) are left out: the combined
    saving adds up only what the trace shows.
    """
    by_id = {span.record.span_id: span for span in profile.spans}
    factors: dict[SpanProfile, float] = {}
    independent: list[frozenset[str]] = []
    changes = 0

    def scale(spans: Sequence[SpanProfile] | set[SpanProfile], factor: float) -> None:
        for span in spans:
            factors[span] = min(factors.get(span, 1.0), factor)

    for finding in findings:
        if finding.rests_on not in SHOWN_BY_THE_TRACE:
            continue
        spans = [by_id[i] for i in finding.span_ids if i in by_id]
        # A kind the registry does not know (a finding made by hand) changes nothing.
        kind = BY_KIND.get(finding.kind)
        change = kind.change if kind is not None else Change.NONE
        if change is Change.TWICE_AS_FAST and spans:
            scale(spans, COMBINED_SPEEDUP_FACTOR)
        elif change is Change.DROP_REPEATS and len(spans) > 1:
            scale(_with_descendants(spans[1:]), 0.0)
        elif change is Change.START_TOGETHER and spans:
            independent.append(frozenset(finding.span_ids))
        else:
            continue
        changes += 1
    projected = projected_duration_scaled_ns(profile, factors, independent, schedule=schedule)
    return CombinedProjection(profile.duration_ns, projected, changes)
