"""Spans as msgspec structs encode to the bytes of ``core.schema.span_to_dict``'s dicts."""

from __future__ import annotations

import msgspec
import pytest

from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.core import trace_to_dict
from otel_agent_profiler.core.analyze import profile_records
from otel_agent_profiler.core.findings import DEFAULT_CONTEXT_WINDOWS
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.core.schema import span_to_dict
from otel_agent_profiler.report.span_json import SpanJson, span_structs, trace_document
from tests.report.test_backend_load_report import loaded_trace
from tests.support.paths import DATA, EXAMPLES


def _example_profiles() -> list[TraceProfile]:
    profiles = []
    for path in (EXAMPLES / "traces" / "research-agent.otlp.json", DATA / "demo_trace.otlp.json"):
        profiles += profile_records(parse_trace_bytes(path.read_bytes(), str(path)).records)
    return profiles


def test_the_struct_has_the_fields_of_the_dict_in_its_order() -> None:
    profile = _example_profiles()[0]
    keys = tuple(span_to_dict(profile.spans[0], profile.start_ns))
    assert SpanJson.__struct_fields__ == keys


@pytest.mark.parametrize("windows", [DEFAULT_CONTEXT_WINDOWS, {"gpt-4o-mini": 1_000}])
def test_a_trace_encodes_to_the_same_bytes(windows: dict[str, int]) -> None:
    # The examples (tokens, time to first token, cost, context use) and a trace with an
    # inference server's load and phases on its calls.
    profiles = [*_example_profiles(), loaded_trace()]
    assert any(span.backend_load is not None and span.llm_phases is not None for span in profiles[-1].spans)
    for profile in profiles:
        expected = msgspec.json.encode(trace_to_dict(profile, context_windows=windows))
        assert msgspec.json.encode(trace_document(profile, windows)) == expected
        without_spans = trace_to_dict(profile, include_spans=False, context_windows=windows)
        assert msgspec.json.encode(trace_document(profile, windows, include_spans=False)) == msgspec.json.encode(
            without_spans
        )
        assert len(span_structs(profile, windows)) == len(profile.spans)
