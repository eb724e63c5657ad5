"""What the profiler knows of a finding kind besides its finder: the record of each kind in the registry.

Everything that differs from kind to kind lives in one ``FindingKind``, a record of the table in
``registry``; the ranking, the combined projection and the cross-trace report read the records
rather than keeping tables of their own. A kind added to the registry is therefore complete, or
the registry's test fails.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from ..profile import TraceProfile
from ..projection import RecordedSchedule
from .base import Finding, FindingOptions


class Finder(Protocol):
    """A finder: every finding of its kinds on one trace, unranked (``find_all`` ranks them).

    ``schedule`` is the trace's recorded schedule, which ``find_all`` builds once and hands to
    every finder so that those projecting savings share it; one called alone builds its own
    when it projects, and a finder that projects nothing ignores it.
    """

    def __call__(
        self, profile: TraceProfile, options: FindingOptions = ..., *, schedule: RecordedSchedule | None = None
    ) -> list[Finding]: ...


class Grouping(enum.Enum):
    """What findings of one kind in many traces are grouped by in the cross-trace report, and so
    which words its sentence (``FindingKind.across_traces``) can use."""

    #: The kind alone: the spans differ from trace to trace without meaning anything. No placeholders.
    KIND = "kind"
    #: The model or tool the finding is about (``Finding.operation``, ``Finding.category``):
    #: ``{calls}`` is "the gpt-4o calls" or "the search tool calls".
    OPERATION = "operation"
    #: The names of the spans it is about (``Finding.where``): ``{named}`` is "'a', 'b' and 'c'"
    #: (or "spans"), ``{calls_of_named}`` the same with "calls of " before a single name.
    SPAN_NAMES = "span_names"
    #: The budget and its category (``evidence["budget"]``, ``evidence["category"]``): ``{budget}``
    #: is "llm tokens" or "cost usd". The whole finding must reach the report, not a summary of it.
    BUDGET = "budget"


#: The placeholders each grouping gives the sentence of its kinds.
PLACEHOLDERS: dict[Grouping, frozenset[str]] = {
    Grouping.KIND: frozenset(),
    Grouping.OPERATION: frozenset({"calls"}),
    Grouping.SPAN_NAMES: frozenset({"named", "calls_of_named"}),
    Grouping.BUDGET: frozenset({"budget"}),
}


class Change(enum.Enum):
    """The change a kind's findings stand for in ``ranking.combined_projection``, which makes every
    change at once."""

    #: No change of definite size (the finding reports numbers), or a question rather than a change (what-ifs).
    NONE = "none"
    #: The finding's spans twice as fast: what bottlenecks and slow tools suggest.
    TWICE_AS_FAST = "twice_as_fast"
    #: Every span of the finding but the first dropped, with what it called: repeated identical calls made once.
    DROP_REPEATS = "drop_repeats"
    #: The finding's spans started together: calls with no dependency run in parallel.
    START_TOGETHER = "start_together"


@dataclass(frozen=True, slots=True)
class FindingKind:
    """One kind of finding: its finder and how the ranking and the reports treat its findings.

    The order in which kinds are registered (``registry.REGISTRY``) is the order in which findings
    of equal saving are listed.
    """

    #: The kind's name, ``Finding.kind``.
    kind: str
    #: The function that makes findings of this kind (some finders make several kinds).
    finder: Finder
    #: What findings of this kind in many traces are grouped by.
    grouping: Grouping
    #: How the cross-trace report says what a group's findings found, as the end of a sentence that starts
    #: "In 18 of 20 traces, ", with the placeholders its ``grouping`` gives (``PLACEHOLDERS``).
    across_traces: str
    #: The change its findings stand for when every finding's change is made together.
    change: Change
    #: The sentence for its findings that rest on an assumption (``rests_on.ASSUMED_NO_RECORDED_FLOW``),
    #: which must not state what they assume; ``None``: its findings never do.
    across_traces_assumed: str | None = None
    #: The kind whose findings it shares spans with when ``rank`` folds findings about the same spans into
    #: one, when its saving stands for the same change as theirs; ``None``: its own kind.
    family: str | None = None
    #: Listed before every kind that does not lead, whatever the savings: a report (or a CI run) opens with
    #: exceeded budgets rather than cutting them off below the savings.
    leads: bool = False
    #: Kept by ``rank`` even when it saves little or nothing: the user asked for it (what-ifs).
    always_kept: bool = False
    #: Its saving is all of its spans' time, what they hold rather than what a change would save: the
    #: cross-trace report says "a median of 1.2 s per trace" rather than "median saving 1.2 s".
    saving_is_held_time: bool = False
    #: The finder ``find_all(..., for_summary=True)`` runs instead of ``finder``: the same findings for a
    #: summary across traces, without the wording it reads none of (see ``find_all``); ``None``: ``finder``.
    summary_finder: Finder | None = None

    @property
    def family_kind(self) -> str:
        """The kind ``rank`` folds by: ``family``, or this kind."""
        return self.family if self.family is not None else self.kind
