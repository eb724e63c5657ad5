"""Every finding kind the profiler knows, in one list: the one line a new kind adds.

Each finder module declares the ``FindingKind`` records of the kinds it finds (``kinds``); this
module lists them, and ``KINDS``, ``FINDERS`` and ``BY_KIND`` are derived from the list, so the
ranking, ``find_all`` and the cross-trace report cannot miss a registered kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from .bottlenecks import BOTTLENECK_KIND, SLOW_TOOL_KIND
from .kinds import Finder, FindingKind
from .large_prompts import LARGE_PROMPT_KIND
from .llm_chains import SEQUENTIAL_LLM_CHAIN_KIND
from .llm_phases import LLM_DECODE_KIND, LLM_PREFILL_KIND, LLM_QUEUE_KIND
from .llm_timing import LLM_GAPS_KIND, LLM_TIMING_KIND, PREFIX_CACHE_KIND
from .parallelization import PARALLELIZABLE_KIND
from .repeated_tool_calls import REPEATED_TOOL_CALL_KIND
from .tokens_and_budgets import BUDGET_EXCEEDED_KIND, TOKEN_PROFILE_KIND
from .what_ifs import WHAT_IF_KIND

#: Every kind, in the order findings with equal savings are listed (after the kinds that lead).
REGISTRY: tuple[FindingKind, ...] = (
    BUDGET_EXCEEDED_KIND,
    BOTTLENECK_KIND,
    PARALLELIZABLE_KIND,
    REPEATED_TOOL_CALL_KIND,
    SLOW_TOOL_KIND,
    WHAT_IF_KIND,
    LLM_QUEUE_KIND,
    SEQUENTIAL_LLM_CHAIN_KIND,
    LARGE_PROMPT_KIND,
    LLM_TIMING_KIND,
    LLM_GAPS_KIND,
    LLM_PREFILL_KIND,
    LLM_DECODE_KIND,
    PREFIX_CACHE_KIND,
    TOKEN_PROFILE_KIND,
)

#: Every kind's name, in the registry's order.
KINDS: tuple[str, ...] = tuple(record.kind for record in REGISTRY)

#: Each kind's record by its name.
BY_KIND: Mapping[str, FindingKind] = {record.kind: record for record in REGISTRY}

#: The finders ``find_all`` runs, each once, in the registry's order (one finder may find several kinds;
#: ``find_what_ifs`` runs ``what_if`` once per ``FindingOptions.what_ifs`` entry). The order changes
#: nothing: ``rank`` sorts findings by kind before anything a finder's order could decide.
FINDERS: tuple[Finder, ...] = tuple(dict.fromkeys(record.finder for record in REGISTRY))
