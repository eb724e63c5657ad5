"""``find_all``: every registered finder (``registry.FINDERS``) on a trace, the findings ranked."""

from __future__ import annotations

from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import DEFAULT_OPTIONS, Finding, FindingOptions
from .ranking import rank
from .registry import FINDERS, SUMMARY_FINDERS
from .rests_on import ASSUMED_NO_RECORDED_FLOW, ESTIMATED_TIMING


def find_all(
    profile: TraceProfile,
    options: FindingOptions = DEFAULT_OPTIONS,
    *,
    schedule: RecordedSchedule | None = None,
    for_summary: bool = False,
) -> list[Finding]:
    """The findings on the trace worth acting on: budget overruns, then the largest saving first (then by kind,
    then title).

    Findings about the same spans are folded into one (see ``ranking.rank``), and the noise is
    left out: savings under ``options.min_saving`` of the trace, and findings that save no time
    and suggest nothing. Each finder on its own returns everything it found.

    Every projection of the trace starts from one ``RecordedSchedule``: ``schedule`` if given (a
    caller that projects the trace again, for ``combined_projection``, builds it and passes it to
    both), else one built here.

    ``for_summary``: for a summary across traces, which reads of each finding only its kind, saving,
    operation, category, the names of its spans (``where``), what it rests on, and a budget overrun
    whole. The same findings come out, in the same order, but kinds with a ``summary_finder`` leave
    out the rest of their wording (titles, evidence, caveats), most of their cost; so do the
    ``details`` that the findings they fold into get from them.
    """
    schedule = schedule if schedule is not None else RecordedSchedule(profile)
    findings: list[Finding] = []
    for finder in SUMMARY_FINDERS if for_summary else FINDERS:
        findings.extend(finder(profile, options, schedule=schedule))
    mark_estimated_timing(profile, findings)
    return rank(profile, findings, options)


#: Added to the sentence of a finding whose saving stands on times its trace's adapter laid out.
ESTIMATED_TIMING_SENTENCE = (
    "These times are estimates, not measurements: the trace's format records when each step happened, not how "
    "long its calls took, so this saving is left out of the combined one."
)


def mark_estimated_timing(profile: TraceProfile, findings: list[Finding]) -> None:
    """Findings whose saving rests on a span with estimated times (``SpanProfile.timing_estimated``,
    set from what the adapter recorded) say so, and rest on "estimated timing" unless they already
    rest on an assumption."""
    estimated = {span.record.span_id for span in profile.spans if span.timing_estimated}
    if not estimated:
        return
    for finding in findings:
        if finding.saving_ns > 0 and not estimated.isdisjoint(finding.span_ids):
            finding.title = f"{finding.title} {ESTIMATED_TIMING_SENTENCE}"
            if finding.rests_on != ASSUMED_NO_RECORDED_FLOW:
                finding.rests_on = ESTIMATED_TIMING
