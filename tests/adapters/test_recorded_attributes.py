"""What a profiler recorded on spans, read back: the package's reader by default, another when given one.

The names and their parsing live in ``adapters/recorded_attributes.py``; the core only knows the
``core.recorded.RecordedValues`` reader it is handed (or the one the package registered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

import otel_agent_profiler
from otel_agent_profiler import core
from otel_agent_profiler.adapters.recorded_attributes import (
    BACKEND_SAMPLES,
    BACKEND_WAITING_MAX,
    COST_USD,
    RECORDED_ATTRIBUTES,
    recorded_backend_load,
    recorded_cost_usd,
)
from otel_agent_profiler.core import AttributeValue
from otel_agent_profiler.core.profile import BackendLoad, TraceProfile
from otel_agent_profiler.live import attributes
from tests.support.span_builders import by_name, span

CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
RECORDED = {**CHAT, COST_USD: 0.25, BACKEND_SAMPLES: 2, BACKEND_WAITING_MAX: 3.0}


class Nothing:
    """A reader for spans whose recorded values are not to be trusted."""

    def backend_load(self, attributes: Mapping[str, object]) -> BackendLoad | None:
        return None

    def cost_usd(self, attributes: Mapping[str, object]) -> float | None:
        return None

    def timing_estimated(self, attributes: Mapping[str, object]) -> bool:
        return False


class Flat:
    """A reader of someone else's spelling: every call cost ten cents."""

    def backend_load(self, attributes: Mapping[str, object]) -> BackendLoad | None:
        return BackendLoad(source="elsewhere", samples=1)

    def cost_usd(self, attributes: Mapping[str, object]) -> float | None:
        return 0.1

    def timing_estimated(self, attributes: Mapping[str, object]) -> bool:
        return True


def test_recorded_attributes_are_read_back_and_bad_values_left_out() -> None:
    attributes: dict[str, AttributeValue] = {
        "agent_profiler.backend.source": "http://vllm:8000/metrics",
        "agent_profiler.backend.samples": 3,
        "agent_profiler.backend.running": 1.5,
        "agent_profiler.backend.waiting_max": 4.0,
        "agent_profiler.backend.kv_cache_usage_max": "full",
        "agent_profiler.backend.prefix_cache_hit_rate": float("nan"),
        "agent_profiler.backend.preemptions": 2,
    }
    assert recorded_backend_load(attributes) == BackendLoad(
        source="http://vllm:8000/metrics", samples=3, running_mean=1.5, waiting_max=4.0, preemptions=2
    )
    assert recorded_backend_load({"agent_profiler.backend.samples": True}) is None
    assert recorded_backend_load({}) is None


@pytest.mark.parametrize("value", [-0.5, "0.1", True, float("nan"), float("inf")])
def test_a_recorded_cost_that_is_no_amount_is_left_out(value: object) -> None:
    assert recorded_cost_usd({COST_USD: value}) is None  # type: ignore[dict-item]
    assert recorded_cost_usd({COST_USD: 2}) == 2.0 and recorded_cost_usd({}) is None


@pytest.mark.parametrize(
    "profile_records",
    [
        otel_agent_profiler.profile_records,
        lambda records: [otel_agent_profiler.profile_trace(records)],
        lambda records: core.profile_records(records, recorded=RECORDED_ATTRIBUTES),
    ],
)
def test_the_packages_functions_read_recorded_values_without_being_told(
    profile_records: Callable[..., list[TraceProfile]],
) -> None:
    (profile,) = profile_records([span("call", None, 0, 10, attributes=RECORDED)])
    call = by_name(profile)["call"]
    assert call.cost_usd == profile.cost_usd == 0.25
    assert call.backend_load == BackendLoad(source="", samples=2, waiting_max=3.0)


def test_the_core_alone_reads_nothing_recorded() -> None:
    # The core holds no default: without a reader, costs come from prices alone.
    (profile,) = core.profile_records([span("call", None, 0, 10, attributes=RECORDED)])
    assert profile.cost_usd is None and by_name(profile)["call"].backend_load is None


def test_another_reader_replaces_the_packages() -> None:
    records = [span("call", None, 0, 10, attributes=RECORDED)]
    (nothing,) = core.profile_records(records, recorded=Nothing())
    assert nothing.cost_usd is None and by_name(nothing)["call"].backend_load is None
    flat = core.profile_trace(records, recorded=Flat())
    assert flat.cost_usd == 0.1 and by_name(flat)["call"].backend_load == BackendLoad(source="elsewhere", samples=1)
    assert by_name(flat)["call"].timing_estimated and not by_name(nothing)["call"].timing_estimated


def test_times_an_adapter_laid_out_are_read_as_estimated() -> None:
    records = [
        span("run", None, 0, 30),
        span("step", "run", 0, 10, attributes={"agent_profiler.timing": "estimated"}),
        span("measured", "run", 10, 20, attributes={"agent_profiler.timing": "measured"}),
    ]
    (profile,) = otel_agent_profiler.profile_records(records)
    assert {node.name: node.timing_estimated for node in profile.spans} == {
        "run": False,
        "step": True,
        "measured": False,
    }
    # The core reads nothing itself: without a reader, no time is taken for an estimate.
    (bare,) = core.profile_records(records)
    assert not any(node.timing_estimated for node in bare.spans)


def test_the_live_attributes_are_the_names_read_back() -> None:
    # Each name is spelled once: the attributes written live are the ones read back.
    assert attributes.COST_USD is COST_USD
    assert BACKEND_SAMPLES in attributes.BACKEND_ATTRIBUTES and BACKEND_WAITING_MAX in attributes.SPAN_ATTRIBUTES
