"""Profiles averaged per agent program: how the runs of each agent or workflow spend their time.

A *program* is what a trace runs: the agent named by its outermost agent span (the span's
``operation``: ``gen_ai.agent.name``, ``gen_ai.workflow.name``, ``agent.name`` or
``traceloop.entity.name``, else the span's name), or the root span's name when the trace has no
agent span, together with the root's ``service.name``. ``ProgramSums`` are the running sums of one
program, so memory grows with the number of programs, never with the number of traces:

* per trace, on average: duration (with p50 and p90 over the program's last ``DURATION_WINDOW``
  traces), critical path, critical path and self time per category, LLM calls, tokens, cost (over
  the traces that were priced) and, over the traces whose LLM calls an inference server's spans
  split, the phases of the critical path's LLM time (``queue``, ``prefill``, ``decode``,
  ``other``);
* error traces: traces with at least one span whose status is ERROR;
* when the inference servers' metrics were polled (``core.backend_load``), the load the traces'
  LLM calls met: running and waiting requests, KV-cache use, prefix-cache hit rate, preemptions.

In the terms of per-program views such as ThunderAgent's: *pause* time is the ``queue`` phase,
*tool* time the ``tool`` category's critical path, *prefill* and *decode* the phases of the same
names.

Pure: the sums of every program, bounded and shared between threads, are held by
``live.program_averages.ProgramAverages``.
"""

from __future__ import annotations

from array import array
from typing import Any

from .backend_load import LoadSummary
from .categories import AGENT, CATEGORIES
from .percentiles import percentile
from .profile import TraceProfile
from .records import StatusCode
from .units import NS_PER_MS

#: Programs averaged at most; the traces of any further program are only counted.
MAX_PROGRAMS = 1000
#: Durations per program the percentiles are computed over: the most recent ones.
DURATION_WINDOW = 1000
#: The service of a trace whose root records no ``service.name`` (OpenTelemetry's own default).
UNKNOWN_SERVICE = "unknown_service"

_ERROR = StatusCode.ERROR
_CATEGORY_COUNT = len(CATEGORIES)


def scan_trace(profile: TraceProfile) -> tuple[str, str, bool]:
    """The trace's service and program, and whether any of its spans has an ERROR status."""
    roots = profile.roots
    root = roots[0]
    service = root.record.resource.get("service.name")
    # Below a single root that is no agent, an agent span at depth 1 is as far out as any can be.
    outermost_possible = 1 if len(roots) == 1 else 0
    agent = None
    agent_depth = 1 << 30
    error = False
    for span in profile.spans:
        if span.record.status is _ERROR:
            error = True
        if span.category == AGENT and span.depth < agent_depth:
            agent, agent_depth = span, span.depth
            if agent_depth <= outermost_possible and error:
                break
    program = agent.operation if agent is not None else root.record.name
    return service if isinstance(service, str) and service else UNKNOWN_SERVICE, program, error


def program_of(profile: TraceProfile) -> tuple[str, str]:
    """The program a trace runs, as ``(service, program)``: see the module docstring."""
    service, program, _ = scan_trace(profile)
    return service, program


class ProgramSums:
    """Running sums of one program's traces (times in nanoseconds) and its recent durations."""

    __slots__ = (
        "backend_hit_rate_sum",
        "backend_hit_rate_traces",
        "backend_kv_cache_max",
        "backend_preemptions",
        "backend_running_sum",
        "backend_running_traces",
        "backend_traces",
        "backend_waiting_max",
        "backend_waiting_max_sum",
        "backend_waiting_traces",
        "cached_input_tokens",
        "category_critical_path_ns",
        "category_self_time_ns",
        "cost_usd",
        "critical_path_ns",
        "duration_ns",
        "error_traces",
        "input_tokens",
        "llm_calls",
        "output_tokens",
        "phase_traces",
        "phases_ns",
        "priced_traces",
        "reasoning_tokens",
        "recent_durations_ns",
        "recent_next",
        "traces",
    )

    def __init__(self) -> None:
        self.traces = 0
        self.error_traces = 0
        self.duration_ns = 0
        self.critical_path_ns = 0
        # Indexed like CATEGORIES.
        self.category_critical_path_ns = [0] * _CATEGORY_COUNT
        self.category_self_time_ns = [0] * _CATEGORY_COUNT
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_input_tokens = 0
        self.reasoning_tokens = 0
        self.priced_traces = 0
        self.cost_usd = 0.0
        self.phase_traces = 0
        # queue, prefill, decode, other
        self.phases_ns = [0, 0, 0, 0]
        # The load the traces' LLM calls met on their servers (core.backend_load), over the traces
        # that have it: per-trace figures summed (means) or kept at their highest.
        self.backend_traces = 0
        self.backend_running_sum = 0.0
        self.backend_running_traces = 0
        self.backend_waiting_max_sum = 0.0
        self.backend_waiting_traces = 0
        self.backend_waiting_max: float | None = None
        self.backend_kv_cache_max: float | None = None
        self.backend_hit_rate_sum = 0.0
        self.backend_hit_rate_traces = 0
        self.backend_preemptions = 0
        # A ring of the last DURATION_WINDOW durations; recent_next is where the next one goes once it is full.
        self.recent_durations_ns = array("q")
        self.recent_next = 0

    def copy(self) -> ProgramSums:
        copied = ProgramSums.__new__(ProgramSums)
        for name in _SCALARS:
            setattr(copied, name, getattr(self, name))
        copied.category_critical_path_ns = self.category_critical_path_ns[:]
        copied.category_self_time_ns = self.category_self_time_ns[:]
        copied.phases_ns = self.phases_ns[:]
        copied.recent_durations_ns = self.recent_durations_ns[:]
        return copied

    def to_dict(self, service: str, program: str) -> dict[str, Any]:
        traces = self.traces
        per_trace_ms = traces * NS_PER_MS
        critical_path_ns = self.critical_path_ns
        categories = {
            name: {
                "critical_path_ms": self.category_critical_path_ns[index] / per_trace_ms,
                "self_time_ms": self.category_self_time_ns[index] / per_trace_ms,
                "critical_path_share": (
                    self.category_critical_path_ns[index] / critical_path_ns if critical_path_ns else 0.0
                ),
            }
            for index, name in enumerate(CATEGORIES)
        }
        recent = self.recent_durations_ns
        phases = None
        if self.phase_traces:
            per_phase_trace_ms = self.phase_traces * NS_PER_MS
            queue, prefill, decode, other = self.phases_ns
            phases = {
                "queue": queue / per_phase_trace_ms,
                "prefill": prefill / per_phase_trace_ms,
                "decode": decode / per_phase_trace_ms,
                "other": other / per_phase_trace_ms,
            }
        return {
            "service": service,
            "program": program,
            "traces": traces,
            "error_traces": self.error_traces,
            "duration_ms": {
                "mean": self.duration_ns / per_trace_ms,
                "p50": percentile(recent, 0.5) / NS_PER_MS,
                "p90": percentile(recent, 0.9) / NS_PER_MS,
            },
            "critical_path_ms": critical_path_ns / per_trace_ms,
            "categories": categories,
            "llm_calls": self.llm_calls / traces,
            "tokens": {
                "input": self.input_tokens / traces,
                "output": self.output_tokens / traces,
                "cached_input": self.cached_input_tokens / traces,
                "reasoning": self.reasoning_tokens / traces,
                "total": (self.input_tokens + self.output_tokens) / traces,
            },
            "priced_traces": self.priced_traces,
            "cost_usd": self.cost_usd / self.priced_traces if self.priced_traces else None,
            "traces_with_llm_phases": self.phase_traces,
            "critical_path_llm_phases_ms": phases,
            "backend_load": self._backend_load(),
        }

    def _backend_load(self) -> dict[str, Any] | None:
        traces = self.backend_traces
        if not traces:
            return None
        return {
            "traces": traces,
            "running_mean": (
                self.backend_running_sum / self.backend_running_traces if self.backend_running_traces else None
            ),
            "waiting_max_mean": (
                self.backend_waiting_max_sum / self.backend_waiting_traces if self.backend_waiting_traces else None
            ),
            "waiting_max": self.backend_waiting_max,
            "kv_cache_usage_max": self.backend_kv_cache_max,
            "prefix_cache_hit_rate": (
                self.backend_hit_rate_sum / self.backend_hit_rate_traces if self.backend_hit_rate_traces else None
            ),
            "preemptions": self.backend_preemptions / traces,
        }

    def add_trace(self, profile: TraceProfile, error: bool, load: LoadSummary | None, duration_window: int) -> None:
        """Add one trace of this program (``error``: a span of it has an ERROR status; ``load``: what
        its LLM calls met, ``summarize_loads``), keeping the last ``duration_window`` durations."""
        categories = profile.categories
        tokens = profile.tokens
        phases = profile.critical_path_llm_phases
        cost = profile.cost_usd
        duration = profile.end_ns - profile.start_ns
        self.traces += 1
        if error:
            self.error_traces += 1
        self.duration_ns += duration
        critical_path = self.category_critical_path_ns
        self_time = self.category_self_time_ns
        # Every span has one category, so the categories' critical paths add up to the trace's.
        trace_critical_path = 0
        for index, stats in enumerate(categories.values()):
            if stats.duration_ns:  # a category with no time has no self time or critical path either
                category_critical_path = stats.critical_path_ns
                critical_path[index] += category_critical_path
                self_time[index] += stats.self_time_ns
                trace_critical_path += category_critical_path
        self.critical_path_ns += trace_critical_path
        self.llm_calls += profile.llm_calls
        self.input_tokens += tokens.input
        self.output_tokens += tokens.output
        self.cached_input_tokens += tokens.cached_input
        self.reasoning_tokens += tokens.reasoning
        if cost is not None:
            self.priced_traces += 1
            self.cost_usd += cost
        if phases is not None:
            self.phase_traces += 1
            sums = self.phases_ns
            sums[0] += phases.queue_ns
            sums[1] += phases.prefill_ns
            sums[2] += phases.decode_ns
            sums[3] += phases.other_ns
        if load is not None:
            self.add_load(load)
        recent = self.recent_durations_ns
        if len(recent) < duration_window:
            recent.append(duration)
        else:
            recent[self.recent_next] = duration
            self.recent_next = (self.recent_next + 1) % duration_window

    def add_load(self, load: LoadSummary) -> None:
        self.backend_traces += 1
        if load.running_mean is not None:
            self.backend_running_sum += load.running_mean
            self.backend_running_traces += 1
        if load.waiting_max is not None:
            self.backend_waiting_max_sum += load.waiting_max
            self.backend_waiting_traces += 1
            self.backend_waiting_max = _highest(self.backend_waiting_max, load.waiting_max)
        if load.kv_cache_usage_max is not None:
            self.backend_kv_cache_max = _highest(self.backend_kv_cache_max, load.kv_cache_usage_max)
        if load.prefix_cache_hit_rate is not None:
            self.backend_hit_rate_sum += load.prefix_cache_hit_rate
            self.backend_hit_rate_traces += 1
        if load.preemptions is not None:
            self.backend_preemptions += load.preemptions


def _highest(kept: float | None, value: float) -> float:
    return value if kept is None or value > kept else kept


_SEQUENCES = ("category_critical_path_ns", "category_self_time_ns", "phases_ns", "recent_durations_ns")
_SCALARS = tuple(name for name in ProgramSums.__slots__ if name not in _SEQUENCES)
