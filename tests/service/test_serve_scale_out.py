"""Scaling `serve` out: two instances behind a trace-id router profile exactly as one instance does.

The property the shipped two-tier configuration relies on (collector-config/: a first tier of
Collectors with the `loadbalancing` exporter routing by trace id, a second tier of `serve`
instances). The router here is a small harness doing the same routing; the traffic is realistic
agent runs, each sent in several requests interleaved with other traces' spans.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig

pytestmark = pytest.mark.e2e
QUIET_PERIOD_S = 3.0


def _service() -> ProfilingService:
    config = ServeConfig(http_port=0, grpc_port=0, pipeline=PipelineConfig(quiet_period_s=QUIET_PERIOD_S))
    return ProfilingService(config).start()


@pytest.fixture
def services() -> Iterator[list[ProfilingService]]:
    started = [_service() for _ in range(3)]
    yield started
    for service in started:
        service.stop()


def _post(service: ProfilingService, spans: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{service.http_port}/v1/traces",
        data=json.dumps(otlp_document(spans)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _profile(service: ProfilingService, trace_id: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{service.http_port}/profiles/{trace_id}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as error:
            if error.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def test_two_instances_behind_a_trace_id_router_give_the_profiles_of_one(services: list[ProfilingService]) -> None:
    first, second, single = services
    runs = generate_runs(24, seed=5)
    # Realistic traffic: each run's spans leave its process in a few batches, mixed with other runs'.
    batches = [run[i : i + 7] for run in runs for i in range(0, len(run), 7)]
    random.Random(1).shuffle(batches)
    for batch in batches:
        trace_id = batch[0]["traceId"]
        owner = first if int(trace_id, 16) % 2 == 0 else second  # the router: by trace id, like loadbalancing
        _post(owner, batch)
        _post(single, batch)

    routed = {first: 0, second: 0}
    for run in runs:
        trace_id = run[0]["traceId"]
        owner = first if int(trace_id, 16) % 2 == 0 else second
        routed[owner] += 1
        routed_profile = _profile(owner, trace_id)
        assert routed_profile["span_count"] == len(run), "every span of the run reached one instance in time"
        assert routed_profile == _profile(single, trace_id)
    assert all(routed.values()), "the router should have used both instances"
