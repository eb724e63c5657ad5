"""The results of profiling: one ``SpanProfile`` per span, one ``TraceProfile`` per trace.

A ``SpanProfile`` is also the node of the span tree, so a trace's tree and its numbers are
one structure. All times are integer nanoseconds; reports convert at the edge.

Every type a profile holds is defined here, the inference server's measures of an LLM call
included (``LlmPhases``, ``LoadSample``, ``BackendLoad``): the modules that compute them
(``call_anatomy``, ``backend_load``) import this one, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .categories import CATEGORIES
from .fast_pickle import pickled_by_fields
from .field_values import field_values
from .genai import TokenUsage
from .records import SpanRecord


class SpanProfile:
    """One span in its tree, with what the analysis found out about it.

    A plain slotted class rather than a dataclass: one is made per span, and the generated
    ``__init__`` with every field as a parameter is a measurable share of the analysis.
    """

    __slots__ = (
        "backend_load",
        "category",
        "children",
        "cost_usd",
        "counted",
        "critical_path_ns",
        "critical_path_waiting_ns",
        "depth",
        "end_ns",
        "ended",
        "llm_call_critical_path_ns",
        "llm_phases",
        "model",
        "model_snapshot",
        "on_critical_path",
        "operation",
        "parent",
        "record",
        "same_call_as",
        "self_time_ns",
        "start_ns",
        "streaming",
        "time_to_first_token_ns",
        "timing_estimated",
        "tokens",
    )

    def __init__(self, record: SpanRecord, start_ns: int, end_ns: int, ended: bool = True) -> None:
        self.record = record
        #: Start and end used for the analysis. ``end_ns`` differs from the record's when the
        #: span never ended or ended before it started (see ``TraceProfile.anomalies``).
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.ended = ended
        self.parent: SpanProfile | None = None
        self.children: list[SpanProfile] = []
        self.depth = 0
        self.category = "internal"
        self.operation = ""
        self.self_time_ns = 0
        self.critical_path_ns = 0
        #: The part of ``critical_path_ns`` during which one of the span's children was running
        #: (a child started while an earlier one still ran): a gap between children, not own code.
        self.critical_path_waiting_ns = 0
        self.on_critical_path = False
        #: True when the trace's format records no real times for this span and its adapter laid
        #: them out itself (an ATIF step's calls): its times are estimates, not measurements.
        self.timing_estimated = False
        #: False for an LLM span left out of LLM counts and token totals: the outer span of two
        #: nested spans describing one call, all but one of the spans that instrumentations write
        #: side by side for one call, or a span that calls no model (see ``core.same_call``).
        self.counted = True
        #: The model's family (``gpt-4o-mini``); the dated snapshot the span names, if any, in
        #: ``model_snapshot`` (``gpt-4o-mini-2024-07-18``). See ``core.models``.
        self.model: str | None = None
        self.model_snapshot: str | None = None
        self.tokens: TokenUsage | None = None
        self.streaming = False
        self.time_to_first_token_ns: int | None = None
        #: Cost of the call's tokens, when a price table names its model.
        self.cost_usd: float | None = None
        #: For an LLM call with an inference server's span below it: its queue, prefill, decode
        #: and other time (``core.call_anatomy``), and how much of the call (its own span and
        #: the server's) is on the critical path.
        self.llm_phases: LlmPhases | None = None
        self.llm_call_critical_path_ns = 0
        #: For an inference server's span of an LLM call, and an HTTP span between the two:
        #: the client's LLM span, whose call this span is part of.
        self.same_call_as: SpanProfile | None = None
        #: For a counted LLM call, the load its inference server showed while it ran, when the
        #: server's metrics were sampled (``core.backend_load``).
        self.backend_load: BackendLoad | None = None

    def __repr__(self) -> str:
        return (
            f"SpanProfile({self.record.name!r}, span_id={self.record.span_id!r}, category={self.category!r}, "
            f"duration_ns={self.duration_ns}, self_time_ns={self.self_time_ns}, "
            f"critical_path_ns={self.critical_path_ns}, on_critical_path={self.on_critical_path})"
        )

    @property
    def span_id(self) -> str:
        return self.record.span_id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class Anomaly:
    """Something wrong with a trace's data that the analysis worked around."""

    #: One of: ``duplicate_span_id``, ``cycle``, ``unended_span``, ``negative_duration``,
    #: ``missing_parent``, ``unusable_token_count``, ``child_outlives_parent``,
    #: ``child_starts_after_parent``, ``server_phases_exceed_call``.
    kind: str
    span_id: str
    detail: str
    #: For a child running past its parent's end (``core.overrunning_children``): the parent, how
    #: much later than it the child ended, how long the child ran after it, and where that time
    #: went: ``(span id, ns)`` of each ancestor whose self time took it, the time other spans
    #: covered anyway, and the time after every ancestor ended.
    parent_span_id: str | None = None
    overrun_ns: int = 0
    outside_ns: int = 0
    self_time_of: tuple[tuple[str, int], ...] = ()
    overlapped_ns: int = 0
    after_roots_ns: int = 0

    def to_dict(self) -> dict[str, object]:
        """The anomaly as JSON-ready data: kind, span id and detail; for a child running past its
        parent, also the parent, the overrun and where its time went (times in milliseconds)."""
        result: dict[str, object] = {"kind": self.kind, "span_id": self.span_id, "detail": self.detail}
        if self.parent_span_id is not None:
            result.update(
                {
                    "parent_span_id": self.parent_span_id,
                    "overrun_ms": self.overrun_ns / 1e6,
                    "outside_parent_ms": self.outside_ns / 1e6,
                    "self_time_of": [{"span_id": span_id, "ms": ns / 1e6} for span_id, ns in self.self_time_of],
                    "overlapped_ms": self.overlapped_ns / 1e6,
                    "after_roots_ms": self.after_roots_ns / 1e6,
                }
            )
        return result


@pickled_by_fields
@dataclass(slots=True)
class CategoryStats:
    count: int = 0
    duration_ns: int = 0
    self_time_ns: int = 0
    critical_path_ns: int = 0


@pickled_by_fields
@dataclass(slots=True)
class OperationStats:
    category: str
    operation: str
    count: int = 0
    duration_ns: int = 0
    self_time_ns: int = 0
    critical_path_ns: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)


def _empty_categories() -> dict[str, CategoryStats]:
    return {category: CategoryStats() for category in CATEGORIES}


@dataclass(slots=True)
class TraceProfile:
    """Everything the analysis core knows about one trace."""

    trace_id: str
    #: Spans in depth-first order, roots (and children) ordered by start time then span id.
    spans: list[SpanProfile]
    roots: list[SpanProfile]
    start_ns: int
    end_ns: int
    anomalies: list[Anomaly] = field(default_factory=list)
    categories: dict[str, CategoryStats] = field(default_factory=_empty_categories)
    #: Keyed by ``(category, operation)``.
    operations: dict[tuple[str, str], OperationStats] = field(default_factory=dict)
    tokens: TokenUsage = field(default_factory=TokenUsage)
    tokens_by_model: dict[str, TokenUsage] = field(default_factory=dict)
    critical_path_tokens: TokenUsage = field(default_factory=TokenUsage)
    llm_calls: int = 0
    #: Costs, from the price table given to the analysis; None without one.
    cost_usd: float | None = None
    critical_path_cost_usd: float | None = None
    cost_by_model: dict[str, float] = field(default_factory=dict)
    #: The phases of the critical path's time in LLM calls that an inference server's span
    #: split (``core.call_anatomy``); None when no call has one.
    critical_path_llm_phases: LlmPhases | None = None
    #: The inference servers' metrics sampled while the trace ran, when they were polled
    #: (``core.backend_load.attach_backend_load``); the report draws them as a load track.
    backend_samples: list[LoadSample] = field(default_factory=list)
    #: ``critical_path_ns`` as ``aggregate`` added it up, from the category totals; None before (or for
    #: a profile made without it): then added up over the spans at each read. The spans' critical-path
    #: times are set before ``aggregate`` runs and never change after it.
    summed_critical_path_ns: int | None = field(default=None, repr=False, compare=False)

    @property
    def duration_ns(self) -> int:
        """From the earliest start to the latest end of any span."""
        return self.end_ns - self.start_ns

    @property
    def critical_path_ns(self) -> int:
        """Sum of every span's critical-path time: the roots' durations, added up."""
        summed = self.summed_critical_path_ns
        return summed if summed is not None else sum(span.critical_path_ns for span in self.spans)

    @property
    def span_count(self) -> int:
        return len(self.spans)

    def release(self) -> None:
        """Unlink the span tree, so it is freed as soon as it is dropped.

        Parents and children point at each other; without this, every profile becomes cyclic
        garbage that only the garbage collector reclaims, which in a long-running process
        costs a third of the profiling time. Totals, spans and roots stay usable; the links
        between spans do not.
        """
        for span in self.spans:
            span.parent = None
            span.children = []


@dataclass(slots=True)
class LlmPhases:
    """One LLM call's time split into phases, in nanoseconds; they add up to the call's duration."""

    queue_ns: int = 0
    prefill_ns: int = 0
    decode_ns: int = 0
    other_ns: int = 0

    @property
    def total_ns(self) -> int:
        return self.queue_ns + self.prefill_ns + self.decode_ns + self.other_ns

    def add(self, other: LlmPhases) -> None:
        self.queue_ns += other.queue_ns
        self.prefill_ns += other.prefill_ns
        self.decode_ns += other.decode_ns
        self.other_ns += other.other_ns

    def scaled(self, part_ns: int) -> LlmPhases:
        """The phases of ``part_ns`` of the call, in the call's proportions (exact integers)."""
        whole = self.total_ns
        if whole <= 0 or part_ns >= whole:
            return LlmPhases(self.queue_ns, self.prefill_ns, self.decode_ns, self.other_ns)
        part_ns = max(0, part_ns)
        queue = self.queue_ns * part_ns // whole
        prefill = self.prefill_ns * part_ns // whole
        decode = self.decode_ns * part_ns // whole
        return LlmPhases(queue, prefill, decode, part_ns - queue - prefill - decode)

    def to_dict(self) -> dict[str, float]:
        """The phases in milliseconds, keyed ``queue``, ``prefill``, ``decode``, ``other``."""
        return {
            "queue": self.queue_ns / 1e6,
            "prefill": self.prefill_ns / 1e6,
            "decode": self.decode_ns / 1e6,
            "other": self.other_ns / 1e6,
        }


@dataclass(frozen=True, slots=True)
class LoadSample:
    """One scrape of an inference server's metrics, reduced to what the profiler uses.

    Attributes:
        time_ns: When it was taken, Unix epoch nanoseconds (the clock spans use).
        source: Which server: the scraped URL, or the instance a recording names.
        running: Requests in the running batch (``vllm:num_requests_running``).
        waiting: Requests queued for a slot (``vllm:num_requests_waiting``).
        kv_cache_usage: Fraction of the KV cache in use, 0 to 1.
        prefix_cache_queries: Cumulative prompt tokens looked up in the prefix cache.
        prefix_cache_hits: Cumulative prompt tokens found there.
        preemptions: Cumulative preemptions (requests evicted to free KV cache).
        models: The model names the server labels its series with.
        prefix_cache_hit_rate: The server's own recent hit rate, 0 to 1, for servers that publish
            a rate rather than hits and queries (SGLang's ``sglang:cache_hit_rate``).
    """

    time_ns: int
    source: str
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    preemptions: float | None = None
    models: tuple[str, ...] = ()
    prefix_cache_hit_rate: float | None = None


@dataclass(frozen=True, slots=True)
class BackendLoad:
    """What one LLM call met on its server. None where the server does not publish the metric.

    Attributes:
        source: The server the samples came from.
        samples: How many samples describe the call (gauges).
        running_mean / running_max: Requests in the running batch.
        waiting_mean / waiting_max: Requests waiting for a slot.
        kv_cache_usage_max: Highest KV-cache use, 0 to 1.
        prefix_cache_hit_rate: Prompt tokens found in the prefix cache over those looked up.
        preemptions: Preemptions on the server while the call ran.
    """

    source: str
    samples: int
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_cache_usage_max: float | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The load as JSON-ready data (``backend_load`` of an LLM span in ``--format json``)."""
        return field_values(self)
