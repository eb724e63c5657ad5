"""Names of the ``agent_profiler.*`` attributes added to exported spans.

The attribute tables of docs/reference/attributes.md are written from ``SPAN_ATTRIBUTES`` and
``ROOT_ATTRIBUTES`` by scripts/docs_reference.py, and the tests check them, so the two never drift apart.
"""

from __future__ import annotations

from ..adapters.recorded_attributes import (
    BACKEND_KV_CACHE_USAGE_MAX as BACKEND_KV_CACHE_USAGE_MAX,
    BACKEND_PREEMPTIONS as BACKEND_PREEMPTIONS,
    BACKEND_PREFIX_CACHE_HIT_RATE as BACKEND_PREFIX_CACHE_HIT_RATE,
    BACKEND_RUNNING as BACKEND_RUNNING,
    BACKEND_RUNNING_MAX as BACKEND_RUNNING_MAX,
    BACKEND_SAMPLES as BACKEND_SAMPLES,
    BACKEND_SOURCE as BACKEND_SOURCE,
    BACKEND_WAITING as BACKEND_WAITING,
    BACKEND_WAITING_MAX as BACKEND_WAITING_MAX,
    COST_USD as COST_USD,
)
from ..core.categories import CATEGORIES

CATEGORY = "agent_profiler.category"
OPERATION = "agent_profiler.operation"
SELF_TIME_MS = "agent_profiler.self_time_ms"
CRITICAL_PATH_MS = "agent_profiler.critical_path_ms"
ON_CRITICAL_PATH = "agent_profiler.on_critical_path"
TIME_TO_FIRST_TOKEN_MS = "agent_profiler.time_to_first_token_ms"
CONTEXT_WINDOW_USE = "agent_profiler.context_window_use"
LLM_QUEUE_MS = "agent_profiler.llm.queue_ms"
LLM_PREFILL_MS = "agent_profiler.llm.prefill_ms"
LLM_DECODE_MS = "agent_profiler.llm.decode_ms"
LLM_OTHER_MS = "agent_profiler.llm.other_ms"
#: Only on LLM spans with an inference server's span below them (``core.call_anatomy``).
LLM_PHASE_ATTRIBUTES = (LLM_QUEUE_MS, LLM_PREFILL_MS, LLM_DECODE_MS, LLM_OTHER_MS)
#: Only on LLM calls whose inference server's metrics were polled (``core.backend_load``). These
#: names and ``COST_USD`` are spelled in ``adapters/recorded_attributes.py``, which reads them back
#: from exported spans for the offline analysis.
BACKEND_ATTRIBUTES = (
    BACKEND_SOURCE,
    BACKEND_SAMPLES,
    BACKEND_RUNNING,
    BACKEND_RUNNING_MAX,
    BACKEND_WAITING,
    BACKEND_WAITING_MAX,
    BACKEND_KV_CACHE_USAGE_MAX,
    BACKEND_PREFIX_CACHE_HIT_RATE,
    BACKEND_PREEMPTIONS,
)

TRACE_DURATION_MS = "agent_profiler.trace.duration_ms"
TRACE_CRITICAL_PATH_MS = "agent_profiler.trace.critical_path_ms"
TRACE_SPAN_COUNT = "agent_profiler.trace.span_count"
TRACE_LLM_CALLS = "agent_profiler.trace.llm_calls"
TRACE_COMPLETE = "agent_profiler.trace.complete"
TRACE_ANOMALIES = "agent_profiler.trace.anomalies"
TRACE_TOKENS_PREFIX = "agent_profiler.trace.tokens."
TRACE_CRITICAL_PATH_TOKENS_PREFIX = "agent_profiler.trace.critical_path_tokens."
TRACE_CATEGORY_CRITICAL_PATH_PREFIX = "agent_profiler.trace.critical_path_ms."
TRACE_COST_USD = "agent_profiler.trace.cost_usd"
TRACE_CRITICAL_PATH_COST_USD = "agent_profiler.trace.critical_path_cost_usd"
BOTTLENECK_OPERATION = "agent_profiler.trace.bottleneck.operation"
BOTTLENECK_CATEGORY = "agent_profiler.trace.bottleneck.category"
BOTTLENECK_CRITICAL_PATH_MS = "agent_profiler.trace.bottleneck.critical_path_ms"
BOTTLENECK_SHARE = "agent_profiler.trace.bottleneck.share"

TOKEN_TYPES = ("input", "output", "cached_input", "reasoning")

#: On a span that a ``force_flush()`` exported before its trace completed, instead of the profile
#: attributes (the trace's critical path was not known yet). The trace's profile, its metrics and
#: its root's totals still cover the span.
EXPORTED_EARLY = "agent_profiler.exported_early"

#: Attributes on every profiled span: name -> (type, unit or None, description).
SPAN_ATTRIBUTES: dict[str, tuple[str, str | None, str]] = {
    CATEGORY: ("string", None, "llm, embedding, tool, agent, retrieval, memory or internal"),
    OPERATION: ("string", None, "the model, tool or agent name; the span name for other spans"),
    SELF_TIME_MS: ("double", "ms", "duration minus the time covered by the span's children"),
    CRITICAL_PATH_MS: ("double", "ms", "the span's own share of its trace's critical path"),
    ON_CRITICAL_PATH: ("boolean", None, "whether the span lies on the critical path"),
    TIME_TO_FIRST_TOKEN_MS: ("double", "ms", "streaming LLM spans: time to the first chunk"),
    COST_USD: ("double", "USD", "LLM and embedding spans whose model has a price"),
    CONTEXT_WINDOW_USE: (
        "double",
        None,
        "LLM spans: input tokens ÷ the model's context window (0.42 = 42%), when the window is known",
    ),
    LLM_QUEUE_MS: ("double", "ms", "LLM spans with an inference server's span below: time queued on the server"),
    LLM_PREFILL_MS: ("double", "ms", "with a server span: time the server spent prefilling the prompt"),
    LLM_DECODE_MS: ("double", "ms", "with a server span: time the server spent decoding the output"),
    LLM_OTHER_MS: ("double", "ms", "with a server span: the rest of the call (network, client and server overhead)"),
    BACKEND_SOURCE: (
        "string",
        None,
        "LLM calls whose inference server's metrics were polled: the metrics URL the load comes from",
    ),
    BACKEND_SAMPLES: ("int", None, "with a server load: the metrics samples that describe the call"),
    BACKEND_RUNNING: ("double", "{request}", "with a server load: requests running on the server, mean"),
    BACKEND_RUNNING_MAX: ("double", "{request}", "with a server load: requests running on the server, highest"),
    BACKEND_WAITING: ("double", "{request}", "with a server load: requests queued on the server, mean"),
    BACKEND_WAITING_MAX: ("double", "{request}", "with a server load: requests queued on the server, highest"),
    BACKEND_KV_CACHE_USAGE_MAX: ("double", "1", "with a server load: highest KV-cache use, 0 to 1"),
    BACKEND_PREFIX_CACHE_HIT_RATE: (
        "double",
        "1",
        "with a server load: prompt tokens found in the prefix cache ÷ those looked up, 0 to 1",
    ),
    BACKEND_PREEMPTIONS: ("int", None, "with a server load: requests the server preempted while the call ran"),
}

#: The span attributes written on every profiled span, whatever ``span_attributes`` says: what
#: Tempo and Jaeger searches and views use (category, self time, the span's critical-path time and
#: whether it is on the path) and what the offline
#: analysis reads back from exported spans and cannot recompute (a call's cost under the price
#: table it ran with, the inference server's load). The rest of ``SPAN_ATTRIBUTES`` can be
#: recomputed from the span or its trace (``analyze`` does) and is written on non-root spans only
#: with ``span_attributes="all"``: each attribute costs the exporter an encoding per span.
ESSENTIAL_SPAN_ATTRIBUTES = frozenset(
    {CATEGORY, SELF_TIME_MS, CRITICAL_PATH_MS, ON_CRITICAL_PATH, COST_USD, *BACKEND_ATTRIBUTES}
)

#: The values of the ``span_attributes`` option.
ALL = "all"
ESSENTIAL = "essential"
SPAN_ATTRIBUTE_SETS = (ESSENTIAL, ALL)

#: Attributes on each root span of a profiled trace: trace totals.
ROOT_ATTRIBUTES: dict[str, tuple[str, str | None, str]] = {
    TRACE_DURATION_MS: ("double", "ms", "earliest start to latest end of the trace's spans"),
    TRACE_CRITICAL_PATH_MS: ("double", "ms", "length of the critical path (sum over the trace's roots)"),
    **{
        f"{TRACE_CATEGORY_CRITICAL_PATH_PREFIX}{category}": (
            "double",
            "ms",
            f"critical-path time in {category} spans; only when the trace has some",
        )
        for category in CATEGORIES
    },
    TRACE_SPAN_COUNT: ("int", None, "spans profiled"),
    TRACE_LLM_CALLS: ("int", None, "LLM calls (nested duplicate spans counted once)"),
    **{
        f"{TRACE_TOKENS_PREFIX}{kind}": ("int", "{token}", f"{kind} tokens of all LLM calls; only when not 0")
        for kind in TOKEN_TYPES
    },
    **{
        f"{TRACE_CRITICAL_PATH_TOKENS_PREFIX}{kind}": (
            "int",
            "{token}",
            f"{kind} tokens of LLM calls on the critical path; with the total above",
        )
        for kind in TOKEN_TYPES
    },
    TRACE_COST_USD: ("double", "USD", "cost of all priced calls (only with a price table)"),
    TRACE_CRITICAL_PATH_COST_USD: ("double", "USD", "cost of priced calls on the critical path"),
    BOTTLENECK_OPERATION: ("string", None, "the operation with the most critical-path time"),
    BOTTLENECK_CATEGORY: ("string", None, "its category"),
    BOTTLENECK_CRITICAL_PATH_MS: ("double", "ms", "its critical-path time"),
    BOTTLENECK_SHARE: ("double", "1", "its share of the critical path, 0 to 1"),
    TRACE_COMPLETE: ("boolean", None, "false when the trace was profiled before all its spans ended"),
    TRACE_ANOMALIES: ("int", None, "data problems the analysis repaired (duplicate ids, cycles, ...)"),
}
