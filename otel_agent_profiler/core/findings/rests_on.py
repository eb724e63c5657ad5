"""What a finding rests on: a small closed vocabulary, shown in JSON as ``Finding.rests_on``.

A saving is only as good as what it stands on. Most findings stand on the trace's measured times;
a parallelization finding also needs evidence that its calls are independent, and the trace may
not hold any; an ATIF run's times were laid out by its adapter, not measured. Findings that rest
on an assumption or on estimated times say so in their sentence and are left out of the combined
projection ("Made together, these changes ..."), which adds up only what the trace shows.
"""

from __future__ import annotations

#: The trace's recorded times, and nothing else.
MEASURED_TIMES = "measured"
#: Tool calls whose ids one LLM response lists: their arguments were fixed together, before any ran.
REQUESTED_TOGETHER = "tool calls requested in one LLM response"
#: The application declared the calls independent (``agent_profiler.independent_group``).
DECLARED_INDEPENDENT = "declared independent"
#: What the calls recorded as inputs and outputs shares nothing between them.
NO_RECORDED_FLOW = "recorded inputs and outputs show no data flow"
#: Nothing recorded shows the calls are independent; the finding assumes it.
ASSUMED_NO_RECORDED_FLOW = "assumed: no recorded data flow"
#: The spans' times were laid out by the trace's adapter (ATIF), not measured.
ESTIMATED_TIMING = "estimated timing"

#: Every value ``Finding.rests_on`` takes.
RESTS_ON: tuple[str, ...] = (
    MEASURED_TIMES,
    REQUESTED_TOGETHER,
    DECLARED_INDEPENDENT,
    NO_RECORDED_FLOW,
    ASSUMED_NO_RECORDED_FLOW,
    ESTIMATED_TIMING,
)

#: What the combined projection builds on: the rest are assumptions or estimates.
SHOWN_BY_THE_TRACE = frozenset({MEASURED_TIMES, REQUESTED_TOGETHER, DECLARED_INDEPENDENT, NO_RECORDED_FLOW})

#: Attribute with which an application declares calls independent: siblings that carry the same
#: value do not need each other's results (``@tool(independent_group=...)`` sets it).
INDEPENDENT_GROUP_ATTRIBUTE = "agent_profiler.independent_group"
