"""core/fast_pickle.py: the value objects workers send back pickle as calls of their class."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from otel_agent_profiler.core.fast_pickle import pickled_by_fields
from otel_agent_profiler.core.findings.base import Finding
from otel_agent_profiler.core.genai import TokenUsage
from otel_agent_profiler.core.profile import CategoryStats, OperationStats
from otel_agent_profiler.core.split_traces import CallFacts, TraceCalls


def test_value_objects_survive_a_round_trip_equal_and_as_their_class() -> None:
    tokens = TokenUsage(100, 20, 50, 3)
    values = [
        tokens,
        CategoryStats(2, 300, 200, 100),
        OperationStats("llm", "gpt-4o", 2, 300, 200, 100, tokens),
        TraceCalls("t1", True, (CallFacts("s1", "gpt-4o", tokens, 0.5, 10, 20, ("host", None)),)),
        Finding(kind="bottleneck", title="t", saving_ns=5, where=[{"name": "chat"}], evidence={"spans": 2}),
    ]
    for value in values:
        copied = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(copied) is type(value) and copied == value
        # One call of the class: no __setstate__ written in Python.
        assert value.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[0] is type(value)


def test_a_field_outside_init_is_refused() -> None:
    @dataclasses.dataclass
    class Partly:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    with pytest.raises(TypeError, match="__init__ parameter"):
        pickled_by_fields(Partly)
