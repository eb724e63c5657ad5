"""The inference server's load while an LLM call ran, from its Prometheus metrics sampled over time.

A self-hosted server (vLLM, SGLang) publishes how busy it is: requests running and waiting,
KV-cache use, prefix-cache queries and hits, preemptions. Sampled about once a second into a
bounded history (``live.load_history.LoadHistory``), those samples say what each LLM call met: a
call that queued behind a full batch shows waiting requests, a long prompt that missed the prefix
cache a low hit rate.

Gauges (running, waiting, KV-cache use) are read from the latest sample at or before the call's
start, if it is recent, and every sample during the call; a call shorter than the polling
interval still gets the state it arrived into. Counters (prefix-cache hits and queries,
preemptions) are differences between the last sample at or before the start and the first at or
after the end, so with one-second polling a short call's hit rate covers the second or two
around it, other requests included. A counter that went down (the server restarted) counts
from zero. A server that publishes its recent hit rate as a gauge instead of counters (SGLang's
``sglang:cache_hit_rate``) gets the mean of that gauge over the call's samples.

Pure: samples come from an adapter (``adapters/prometheus_metrics.py``) or from a recording. A
load attached live travels on the enriched LLM span as attributes, which the offline analysis
reads back (``core.recorded``; the names and their parsing: ``adapters/recorded_attributes.py``),
so an exported trace analysed later shows the same loads.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .categories import LLM
from .field_values import field_values
from .models import model_family
from .profile import BackendLoad, LoadSample, SpanProfile, TraceProfile

#: Polls are about a second apart; a sample older than this before a call does not describe it.
DEFAULT_MAX_GAP_NS = 2_500_000_000
#: Thirty minutes of one-second samples per server.
DEFAULT_MAX_SAMPLES = 1800


def load_during(
    samples: list[LoadSample], start_ns: int, end_ns: int, *, max_gap_ns: int = DEFAULT_MAX_GAP_NS
) -> BackendLoad | None:
    """The load one server's ``samples`` (sorted by time) show for a call from ``start_ns`` to ``end_ns``.

    None when no sample describes the call: none during it and none recent enough before it.
    """
    if not samples:
        return None
    times = [sample.time_ns for sample in samples]
    # The latest sample at or before the start describes the state the call arrived into.
    first_inside = bisect.bisect_right(times, start_ns)
    past_end = bisect.bisect_right(times, end_ns)
    before = samples[first_inside - 1] if first_inside > 0 else None
    if before is not None and start_ns - before.time_ns > max_gap_ns:
        before = None
    described = ([before] if before is not None else []) + samples[first_inside:past_end]
    if not described:
        return None
    after = samples[past_end] if past_end < len(samples) else None
    if after is not None and after.time_ns - end_ns > max_gap_ns:
        after = None
    opening = described[0]
    closing = after if after is not None else described[-1]
    hits = _increase(opening.prefix_cache_hits, closing.prefix_cache_hits)
    queries = _increase(opening.prefix_cache_queries, closing.prefix_cache_queries)
    preemptions = _increase(opening.preemptions, closing.preemptions) if closing is not opening else None
    running = [s.running for s in described if s.running is not None]
    waiting = [s.waiting for s in described if s.waiting is not None]
    kv_cache = [s.kv_cache_usage for s in described if s.kv_cache_usage is not None]
    hit_rate = min(1.0, hits / queries) if hits is not None and queries else None
    if hit_rate is None:
        rates = [s.prefix_cache_hit_rate for s in described if s.prefix_cache_hit_rate is not None]
        hit_rate = sum(rates) / len(rates) if rates else None
    return BackendLoad(
        source=opening.source,
        samples=len(described),
        running_mean=sum(running) / len(running) if running else None,
        running_max=max(running) if running else None,
        waiting_mean=sum(waiting) / len(waiting) if waiting else None,
        waiting_max=max(waiting) if waiting else None,
        kv_cache_usage_max=max(kv_cache) if kv_cache else None,
        prefix_cache_hit_rate=hit_rate,
        preemptions=round(preemptions) if preemptions is not None else None,
    )


def _increase(opening: float | None, closing: float | None) -> float | None:
    """A counter's increase; a counter that went down was reset, so it counts from zero."""
    if opening is None or closing is None:
        return None
    return closing - opening if closing >= opening else closing


class LoadSource(Protocol):
    """What ``attach_backend_load`` reads: the servers' samples, as ``LoadSamples`` holds them
    (offline) or the live poller's ``live.load_history.LoadHistory`` (its snapshot, while it polls)."""

    def load_during(self, start_ns: int, end_ns: int, model: str | None = None) -> BackendLoad | None: ...

    def samples_between(self, start_ns: int, end_ns: int, sources: Iterable[str]) -> list[LoadSample]: ...


class ReadsLoad:
    """A ``LoadSource`` made of the servers' histories: what a call met and what a trace's track shows
    are read the same way from ``LoadSamples`` and from the live ``LoadHistory``."""

    max_gap_ns: int

    def histories(self) -> list[Sequence[LoadSample]]:
        """Every server's samples, oldest first (a copy of the list when the histories can grow)."""
        raise NotImplementedError

    def samples(self, source: str) -> list[LoadSample]:
        """A copy of one server's samples, oldest first."""
        raise NotImplementedError

    def load_during(self, start_ns: int, end_ns: int, model: str | None = None) -> BackendLoad | None:
        """What a call from ``start_ns`` to ``end_ns`` met, on the server that serves ``model``
        (see ``serving_history``)."""
        history = serving_history(self.histories(), model)
        if history is None:
            return None
        return load_during(list(history), start_ns, end_ns, max_gap_ns=self.max_gap_ns)

    def samples_between(self, start_ns: int, end_ns: int, sources: Iterable[str]) -> list[LoadSample]:
        """The samples of ``sources`` from ``start_ns`` to ``end_ns``, with one either side (a track's edges)."""
        found: list[LoadSample] = []
        for source in sources:
            found += samples_between(self.samples(source), start_ns, end_ns)
        return found


@dataclass(frozen=True)
class LoadSamples(ReadsLoad):
    """The samples of each server over a span of time, fixed once made (read from a recording or
    copied from a live history).

    Args:
        by_source: Each server's samples, oldest first, in the order the servers were first seen.
        max_gap_ns: How old a sample before a call may be and still describe it.
    """

    by_source: Mapping[str, Sequence[LoadSample]] = field(default_factory=dict)
    max_gap_ns: int = DEFAULT_MAX_GAP_NS

    def sources(self) -> list[str]:
        """The servers with samples, in the order they were first seen."""
        return list(self.by_source)

    def samples(self, source: str) -> list[LoadSample]:
        """A copy of one server's samples, oldest first."""
        return list(self.by_source.get(source, ()))

    def histories(self) -> list[Sequence[LoadSample]]:
        """Every server's samples, oldest first."""
        return list(self.by_source.values())


def serving_history(histories: Sequence[Sequence[LoadSample]], model: str | None) -> Sequence[LoadSample] | None:
    """Of the servers' ``histories``, the one a call to ``model`` went to.

    With one server, that server. With several, the one whose series name ``model``; None
    when no server names it (the call went elsewhere, or ``model`` is unknown).
    """
    if len(histories) != 1:
        histories = [h for h in histories if h and model is not None and _serves(h[-1], model)]
        if len(histories) != 1:
            return None
    return histories[0]


def samples_between(samples: Sequence[LoadSample], start_ns: int, end_ns: int) -> list[LoadSample]:
    """The ``samples`` (one server's, sorted) from ``start_ns`` to ``end_ns``, with one either side."""
    times = [sample.time_ns for sample in samples]
    first = max(0, bisect.bisect_left(times, start_ns) - 1)
    return list(samples[first : bisect.bisect_right(times, end_ns) + 1])


def _serves(sample: LoadSample, model: str) -> bool:
    """Whether a server's series name ``model``, exactly or by family (a dated snapshot is the same model)."""
    return model in sample.models or model_family(model) in {model_family(name) for name in sample.models}


def attach_backend_load(profile: TraceProfile, history: LoadSource) -> int:
    """Set ``backend_load`` on each counted LLM call of ``profile`` that ``history`` describes.

    The call's server is the one whose series name the call's model (snapshot first, then
    family); with one server, that one. A call ``history`` does not describe keeps a load its
    span recorded. The samples of the servers found, over the trace's time, go to
    ``profile.backend_samples`` (the report draws them). Returns how many calls got a load.
    """
    attached = 0
    sources: dict[str, None] = {}
    for span in profile.spans:
        if span.category != LLM or not span.counted:
            continue
        load = None
        for model in dict.fromkeys((span.model_snapshot, span.model)):
            load = history.load_during(span.start_ns, span.end_ns, model)
            if load is not None:
                break
        if load is not None:
            span.backend_load = load
            sources[load.source] = None
            attached += 1
    if sources:
        profile.backend_samples = history.samples_between(profile.start_ns, profile.end_ns, sources)
    return attached


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """The load a trace's LLM calls met, over the calls that have one.

    Attributes:
        calls: LLM calls with a load.
        running_mean: Mean over the calls of their mean running requests.
        waiting_max: Most requests any call saw waiting.
        kv_cache_usage_max: Highest KV-cache use any call saw, 0 to 1.
        prefix_cache_hit_rate: The calls' hit rates, weighted by their durations.
        preemptions: Preemptions during the calls, added up (calls at the same time share theirs).
    """

    calls: int
    running_mean: float | None
    waiting_max: float | None
    kv_cache_usage_max: float | None
    prefix_cache_hit_rate: float | None
    preemptions: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``backend_load`` of a trace in ``--format json``)."""
        return field_values(self)


def summarize_loads(spans: Iterable[SpanProfile]) -> LoadSummary | None:
    """What the LLM calls among ``spans`` met on their servers; None when none has a load."""
    calls = [(span.backend_load, span.duration_ns) for span in spans if span.backend_load is not None]
    if not calls:
        return None
    running = [load.running_mean for load, _ in calls if load.running_mean is not None]
    waiting = [load.waiting_max for load, _ in calls if load.waiting_max is not None]
    kv_cache = [load.kv_cache_usage_max for load, _ in calls if load.kv_cache_usage_max is not None]
    rated = [(load.prefix_cache_hit_rate, ns) for load, ns in calls if load.prefix_cache_hit_rate is not None]
    weight = sum(ns for _, ns in rated)
    if rated and weight:
        hit_rate: float | None = sum(rate * ns for rate, ns in rated) / weight
    else:
        hit_rate = sum(rate for rate, _ in rated) / len(rated) if rated else None
    preemptions = [load.preemptions for load, _ in calls if load.preemptions is not None]
    return LoadSummary(
        calls=len(calls),
        running_mean=sum(running) / len(running) if running else None,
        waiting_max=max(waiting) if waiting else None,
        kv_cache_usage_max=max(kv_cache) if kv_cache else None,
        prefix_cache_hit_rate=hit_rate,
        preemptions=sum(preemptions) if preemptions else None,
    )
