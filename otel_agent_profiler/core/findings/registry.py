"""Every finding kind the profiler knows, in one table: the one record a new kind adds.

Each ``FindingKind`` record (``kinds``) names the finder that makes findings of its kind, how
its findings fold and what their change does in the combined projection, and how the report of
many traces groups them and says what they found. ``KINDS``, ``FINDERS`` and ``BY_KIND`` are
derived from the table, so the ranking, ``find_all`` and the cross-trace report cannot miss a
registered kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from .bottlenecks import BOTTLENECK, SLOW_TOOL, find_bottlenecks, find_bottlenecks_for_summary, find_slow_tools
from .kinds import Change, Finder, FindingKind, Grouping
from .large_prompts import LARGE_PROMPT, find_large_prompts
from .llm_chains import SEQUENTIAL_LLM_CHAIN, find_sequential_llm_chains, find_sequential_llm_chains_for_summary
from .llm_phases import LLM_DECODE, LLM_PREFILL, LLM_QUEUE, find_llm_phases
from .llm_timing import (
    LLM_GAPS,
    LLM_TIMING,
    PREFIX_CACHE,
    find_llm_gaps,
    find_llm_gaps_for_summary,
    find_llm_timing,
    find_prefix_cache,
)
from .parallelization import PARALLELIZABLE, find_parallelization, find_parallelization_for_summary
from .repeated_tool_calls import REPEATED_TOOL_CALL, find_repeated_tool_calls
from .tokens_and_budgets import (
    BUDGET_EXCEEDED,
    TOKEN_PROFILE,
    find_budget_overruns,
    find_token_profile,
    find_token_profile_for_summary,
)
from .what_ifs import WHAT_IF, find_what_ifs

#: Every kind, in the order findings with equal savings are listed (after the kinds that lead).
REGISTRY: tuple[FindingKind, ...] = (
    # Exceeded budgets lead every list of findings.
    FindingKind(
        BUDGET_EXCEEDED,
        find_budget_overruns,
        grouping=Grouping.BUDGET,
        across_traces="the {budget} budget was exceeded",
        change=Change.NONE,
        leads=True,
    ),
    # A bottleneck's saving is all of its spans' time, what they hold; slow tools save by the same
    # change (removing a span's own time), so they fold together.
    FindingKind(
        BOTTLENECK,
        find_bottlenecks,
        grouping=Grouping.OPERATION,
        across_traces="{calls} held much of the critical path",
        change=Change.TWICE_AS_FAST,
        saving_is_held_time=True,
        summary_finder=find_bottlenecks_for_summary,
    ),
    FindingKind(
        PARALLELIZABLE,
        find_parallelization,
        grouping=Grouping.SPAN_NAMES,
        across_traces="{calls_of_named} ran one after another though nothing made them wait for each other",
        change=Change.START_TOGETHER,
        across_traces_assumed="{calls_of_named} ran one after another with no recorded data flow between them",
        summary_finder=find_parallelization_for_summary,
    ),
    FindingKind(
        REPEATED_TOOL_CALL,
        find_repeated_tool_calls,
        grouping=Grouping.OPERATION,
        across_traces="{calls} were repeated with the same arguments",
        change=Change.DROP_REPEATS,
    ),
    FindingKind(
        SLOW_TOOL,
        find_slow_tools,
        grouping=Grouping.OPERATION,
        across_traces="{calls} were slow",
        change=Change.TWICE_AS_FAST,
        family=BOTTLENECK,
    ),
    # A what-if is a question, not a change, and is kept whatever it saves: the user asked it.
    FindingKind(
        WHAT_IF,
        find_what_ifs,
        grouping=Grouping.SPAN_NAMES,
        across_traces="a what-if about {named} shortened the trace",
        change=Change.NONE,
        always_kept=True,
    ),
    # The sentences of the LLM phase kinds (queue, prefill, decode) are the words the cross-trace report
    # gave every kind it had no sentence for; better ones would change its output.
    FindingKind(
        LLM_QUEUE,
        find_llm_phases,
        grouping=Grouping.SPAN_NAMES,
        across_traces="a llm queue finding was about {named}",
        change=Change.NONE,
    ),
    FindingKind(
        SEQUENTIAL_LLM_CHAIN,
        find_sequential_llm_chains,
        grouping=Grouping.SPAN_NAMES,
        across_traces="the LLM calls {named} ran one after another",
        change=Change.NONE,
        summary_finder=find_sequential_llm_chains_for_summary,
    ),
    FindingKind(
        LARGE_PROMPT,
        find_large_prompts,
        grouping=Grouping.OPERATION,
        across_traces="{calls} sent prompts that fill much of the context window",
        change=Change.NONE,
    ),
    # The spans that LLM timing, gaps, prefix cache and token profile findings name differ from trace to
    # trace without meaning anything: across traces they are grouped by kind alone.
    FindingKind(
        LLM_TIMING,
        find_llm_timing,
        grouping=Grouping.KIND,
        across_traces="streaming LLM calls spent much of their time waiting for the first token",
        change=Change.NONE,
    ),
    FindingKind(
        LLM_GAPS,
        find_llm_gaps,
        grouping=Grouping.KIND,
        across_traces="time passed between consecutive LLM calls",
        change=Change.NONE,
        summary_finder=find_llm_gaps_for_summary,
    ),
    FindingKind(
        LLM_PREFILL,
        find_llm_phases,
        grouping=Grouping.SPAN_NAMES,
        across_traces="a llm prefill finding was about {named}",
        change=Change.NONE,
    ),
    FindingKind(
        LLM_DECODE,
        find_llm_phases,
        grouping=Grouping.SPAN_NAMES,
        across_traces="a llm decode finding was about {named}",
        change=Change.NONE,
    ),
    FindingKind(
        PREFIX_CACHE,
        find_prefix_cache,
        grouping=Grouping.KIND,
        across_traces="the provider's prefix cache served part of the input tokens",
        change=Change.NONE,
    ),
    FindingKind(
        TOKEN_PROFILE,
        find_token_profile,
        grouping=Grouping.KIND,
        across_traces="the token use of the trace was worth a look",
        change=Change.NONE,
        summary_finder=find_token_profile_for_summary,
    ),
)

#: Every kind's name, in the registry's order.
KINDS: tuple[str, ...] = tuple(record.kind for record in REGISTRY)

#: Each kind's record by its name.
BY_KIND: Mapping[str, FindingKind] = {record.kind: record for record in REGISTRY}

#: The finders ``find_all`` runs, each once, in the registry's order (one finder may find several kinds;
#: ``find_what_ifs`` runs ``what_if`` once per ``FindingOptions.what_ifs`` entry). The order changes
#: nothing: ``rank`` sorts findings by kind before anything a finder's order could decide.
FINDERS: tuple[Finder, ...] = tuple(dict.fromkeys(record.finder for record in REGISTRY))

#: The finders ``find_all(..., for_summary=True)`` runs: each kind's ``summary_finder`` where it has one.
SUMMARY_FINDERS: tuple[Finder, ...] = tuple(
    dict.fromkeys(record.summary_finder or record.finder for record in REGISTRY)
)
