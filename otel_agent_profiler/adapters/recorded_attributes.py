"""The ``agent_profiler.*`` attributes that carry what a profiler recorded, and their reader for the core.

Two values travel on spans from one run of the profiler to a later analysis: the load an LLM call
met on its inference server (written live by ``live/profiling.py`` when the server's metrics are
polled) and the cost of a call (written live from a price table, and by the ATIF adapter from a
step's ``metrics.cost_usd``). The names are our wire format, spelled here once; ``live/attributes.py``
registers them with units for the spans it enriches, and ``RECORDED_ATTRIBUTES`` reads them back
for the core (``core.recorded.RecordedValues``), so an exported trace analysed later shows the same
loads and costs. A third value says that a span's times are not measured: the ATIF adapter lays
out the calls of a step itself and marks them ``agent_profiler.timing=estimated``, so findings
built on those times say they are estimates.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.profile import BackendLoad
from ..core.records import AttributeValue, non_negative_number

#: On an LLM span with a load: the metrics URL, how many samples describe the call, and the load.
BACKEND_SOURCE = "agent_profiler.backend.source"
BACKEND_SAMPLES = "agent_profiler.backend.samples"
BACKEND_RUNNING = "agent_profiler.backend.running"
BACKEND_RUNNING_MAX = "agent_profiler.backend.running_max"
BACKEND_WAITING = "agent_profiler.backend.waiting"
BACKEND_WAITING_MAX = "agent_profiler.backend.waiting_max"
BACKEND_KV_CACHE_USAGE_MAX = "agent_profiler.backend.kv_cache_usage_max"
BACKEND_PREFIX_CACHE_HIT_RATE = "agent_profiler.backend.prefix_cache_hit_rate"
BACKEND_PREEMPTIONS = "agent_profiler.backend.preemptions"

#: The cost of the call as the run recorded it, in US dollars. It is used as is, before any price table.
COST_USD = "agent_profiler.cost_usd"

#: How the span's times were obtained; ``TIMING_ESTIMATED`` when an adapter laid them out itself.
TIMING = "agent_profiler.timing"
TIMING_ESTIMATED = "estimated"


def recorded_backend_load(attributes: Mapping[str, AttributeValue]) -> BackendLoad | None:
    """The load a live profiler wrote on an LLM span (``agent_profiler.backend.*``), or None.

    Values of the wrong type are left out rather than trusted; without a sample count the span
    has no load.
    """
    if BACKEND_SAMPLES not in attributes:
        # Asked of every LLM span; most were not enriched.
        return None
    samples = non_negative_number(attributes.get(BACKEND_SAMPLES))
    if samples is None or samples < 1:
        return None
    source = attributes.get(BACKEND_SOURCE)
    preemptions = non_negative_number(attributes.get(BACKEND_PREEMPTIONS))
    return BackendLoad(
        source=source if isinstance(source, str) else "",
        samples=int(samples),
        running_mean=non_negative_number(attributes.get(BACKEND_RUNNING)),
        running_max=non_negative_number(attributes.get(BACKEND_RUNNING_MAX)),
        waiting_mean=non_negative_number(attributes.get(BACKEND_WAITING)),
        waiting_max=non_negative_number(attributes.get(BACKEND_WAITING_MAX)),
        kv_cache_usage_max=non_negative_number(attributes.get(BACKEND_KV_CACHE_USAGE_MAX)),
        prefix_cache_hit_rate=non_negative_number(attributes.get(BACKEND_PREFIX_CACHE_HIT_RATE)),
        preemptions=round(preemptions) if preemptions is not None else None,
    )


def recorded_cost_usd(attributes: Mapping[str, AttributeValue]) -> float | None:
    """The recorded cost in ``attributes``, or None when there is none or it is not a usable amount."""
    cost = attributes.get(COST_USD)
    # Asked of every counted LLM and embedding call; most carry no recorded cost.
    return None if cost is None else non_negative_number(cost)


def recorded_timing_estimated(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether ``attributes`` mark the span's times as laid out by an adapter rather than measured."""
    return attributes.get(TIMING) == TIMING_ESTIMATED


class RecordedAttributes:
    """Reads the recorded values from the attributes above (a ``core.recorded.RecordedValues``)."""

    # The functions themselves, so the core's call per span is one call, not two.
    backend_load = staticmethod(recorded_backend_load)
    cost_usd = staticmethod(recorded_cost_usd)
    timing_estimated = staticmethod(recorded_timing_estimated)


#: The reader every part of the package profiles with (``recorded=``), the package's ``profile_records`` included.
RECORDED_ATTRIBUTES = RecordedAttributes()
