"""Scale-out for real: ``collector-config/otelcol-tier1-loadbalancing.yaml`` in a real OpenTelemetry Collector,
routing by trace id to real ``serve`` replicas, each forwarding to one real Jaeger.

The collector runs the shipped file with its endpoints replaced and, since the replicas share one host and
so need a port each, its DNS resolver swapped for the static list its own comment gives
(:func:`tests.support.go_backends.tier1_collector_config`). The applications are this test: realistic agent
runs (``benchmarks/agent_traces.py``), each sent to tier 1 over OTLP/HTTP in several requests mixed with
other runs' requests, as processes' batch processors send them.

What each test asks:

* every trace is profiled exactly once, complete, by one replica, with the profile that ``analyze`` gives
  offline for the same spans, and every span reaches Jaeger;
* a replica killed (SIGKILL) mid-run loses exactly what README says ("Delivery guarantees", ``serve``
  killed): the spans it held at the kill (``held_spans`` + ``pending_spans``), no other; what tier 1 sends
  it while it is down is retried, and delivered once it is back;
* the replica list edited and the collector reloaded (SIGHUP) loses no span the collector accepted.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from tests.support.backends import HOST, BackendProcess, artifact_dir, free_ports, http_get, port_open, wait_until
from tests.support.go_backends import Jaeger, Otelcol, require_go_backends, tier1_collector_config

pytestmark = pytest.mark.e2e

Run = list[dict[str, Any]]
#: Longer than tier 1 takes to pass on all the requests of one run (its batch processor waits up to 200 ms),
#: and long enough that what a replica holds can be read before it is killed.
QUIET_PERIOD_S = 3.0


class Replica:
    """One ``otel-agent-profiler serve`` (tier 2), forwarding to ``upstream`` over OTLP/gRPC."""

    def __init__(self, logs: Path, name: str, upstream: str, quiet_period_s: float = QUIET_PERIOD_S) -> None:
        self.name = name
        self.http_port, self.grpc_port = free_ports(2)
        self.argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(self.http_port)]
        self.argv += ["--grpc-port", str(self.grpc_port), "--upstream", f"http://{upstream}"]
        self.argv += ["--upstream-protocol", "grpc", "--quiet-period", str(quiet_period_s)]
        self.logs = logs
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        self.process = BackendProcess(name, self.argv, logs / f"{name}.log", self.env)

    @property
    def endpoint(self) -> str:
        """Where tier 1 sends it traces: its OTLP/gRPC receiver, as the shipped file's port 4317."""
        return f"{HOST}:{self.grpc_port}"

    def start(self) -> Replica:
        self.process.start()
        wait_until(
            lambda: port_open(self.http_port) and port_open(self.grpc_port),
            30,
            f"{self.name} to listen",
            alive=self.process.check_alive,
            details=self.process.log_tail,
        )
        return self

    def restart(self, wait: bool = True) -> Replica:
        """Start it again on the same ports, as an orchestrator restarts a killed replica; without ``wait``,
        return while it is still starting (a Python process takes a second or two to listen)."""
        self.process = BackendProcess(self.name, self.argv, self.logs / f"{self.name}.log", self.env)
        if not wait:
            self.process.start()
            return self
        return self.start()

    def wait_listening(self) -> None:
        wait_until(
            lambda: port_open(self.http_port) and port_open(self.grpc_port),
            30,
            f"{self.name} to listen",
            alive=self.process.check_alive,
            details=self.process.log_tail,
        )

    def kill(self) -> None:
        pid = self.process.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the process group BackendProcess started, nothing else
        self.process.stop(timeout=5)

    def counts(self) -> dict[str, int]:
        status, body = http_get(f"http://{HOST}:{self.http_port}/health", timeout=5)
        assert status == 200, body
        return json.loads(body)["counts"]  # type: ignore[no-any-return]

    def profile(self, trace_id: str) -> dict[str, Any] | None:
        try:
            status, body = http_get(f"http://{HOST}:{self.http_port}/profiles/{trace_id}", timeout=5)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        return json.loads(body) if status == 200 else None  # type: ignore[no-any-return]


@dataclass
class Tier:
    logs: Path
    jaeger: Jaeger
    replicas: list[Replica]
    collector: Otelcol
    health_port: int
    grpc_port: int
    http_port: int
    sent: dict[str, Run] = field(default_factory=dict)  # trace id -> its spans, as tier 1 accepted them
    # trace id -> when tier 1 accepted its first and its last request (time.monotonic())
    accepted_at: dict[str, tuple[float, float]] = field(default_factory=dict)

    def config(self, replicas: list[Replica]) -> str:
        return tier1_collector_config(
            [r.endpoint for r in replicas],
            upstream=self.jaeger.otlp_grpc_endpoint,
            health_port=self.health_port,
            grpc_port=self.grpc_port,
            http_port=self.http_port,
        )

    def send(self, runs: list[Run], seed: int, batch: int = 7, pause_s: float = 0.0, concurrent: int = 0) -> None:
        """The runs' spans to tier 1 over OTLP/HTTP, each run in requests of ``batch`` spans, mixed with the
        requests of the other runs (of the ``concurrent`` runs sent together; all, by default). A request tier
        1 does not take (it is reloading) is sent again, as an SDK's exporter retries, until it is accepted."""
        rng = random.Random(seed)
        concurrent = concurrent or len(runs)
        requests = []
        for group in range(0, len(runs), concurrent):
            together = [
                run[i : i + batch] for run in runs[group : group + concurrent] for i in range(0, len(run), batch)
            ]
            rng.shuffle(together)
            requests += together
        for spans in requests:
            body = json.dumps(otlp_document(spans)).encode()
            wait_until(lambda body=body: self._post(body), 30, "tier 1 to accept a request", interval=0.1)
            accepted = time.monotonic()
            first, _ = self.accepted_at.get(spans[0]["traceId"], (accepted, accepted))
            self.accepted_at[spans[0]["traceId"]] = (first, accepted)
            time.sleep(pause_s)
        for run in runs:
            self.sent[run[0]["traceId"]] = run

    def _post(self, body: bytes) -> bool:
        post = urllib.request.Request(
            f"http://{HOST}:{self.http_port}/v1/traces", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(post, timeout=10) as answer:
                return answer.status == 200
        except OSError:  # refused or reset while the collector reloads, or a 503 (urllib's HTTPError)
            return False

    def jaeger_span_ids(self, trace_id: str) -> set[str]:
        trace = self.jaeger.trace(trace_id)
        return set() if trace is None else {span["spanID"] for span in trace["spans"]}


def start_tier(logs: Path, replicas: int, quiet_period_s: float = QUIET_PERIOD_S) -> Tier:
    require_go_backends()
    jaeger = Jaeger(logs).start()
    started: list[Replica] = []
    try:
        started = [
            Replica(logs, f"serve-{i}", jaeger.otlp_grpc_endpoint, quiet_period_s).start() for i in range(replicas)
        ]
        health, grpc, http = free_ports(3)
        tier = Tier(logs, jaeger, started, None, health, grpc, http)  # type: ignore[arg-type]
        tier.collector = Otelcol(tier.config(started), logs, health_port=health, name="otelcol-tier1").start()
        return tier
    except BaseException:
        for replica in started:
            replica.process.stop()
        jaeger.stop()
        raise


def stop_tier(tier: Tier) -> None:
    tier.collector.stop()
    for replica in tier.replicas:
        replica.process.stop()
    tier.jaeger.stop()


def wait_for_spans(tier: Tier, expected: dict[str, set[str]], timeout: float = 60.0) -> None:
    """Until Jaeger holds every span id of ``expected`` (trace id -> span ids)."""
    missing = dict(expected)

    def probe() -> bool:
        for trace_id in list(missing):
            if missing[trace_id] <= tier.jaeger_span_ids(trace_id):
                del missing[trace_id]
        return not missing

    wait_until(probe, timeout, "every span in Jaeger", interval=0.5, details=lambda: f"missing: {sorted(missing)}")


def agent_runs(count: int, seed: int) -> list[Run]:
    """``count`` agent runs, each with a random trace id (``generate_runs`` numbers them from 1 in every call,
    and two calls must not send the same traces)."""
    rng = random.Random(seed)
    runs = generate_runs(count, seed=seed)
    for run in runs:
        trace_id = f"{rng.getrandbits(128):032x}"
        for span in run:
            span["traceId"] = trace_id
    return runs


def span_ids(run: Run) -> set[str]:
    return {span["spanId"] for span in run}


def offline_profiles(runs: list[Run], path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """``analyze --format json`` of the same spans: each trace's profile, without what only reports add."""
    path.write_text("\n".join(json.dumps(otlp_document(run)) for run in runs) + "\n")
    capsys.readouterr()
    code = main(["analyze", "--no-progress", "--format", "json", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    profiles = {}
    for trace in json.loads(out)["traces"]:
        for key in ("findings", "combined_projection", "what_if"):
            trace.pop(key, None)
        profiles[trace["trace_id"]] = trace
    return profiles


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    """One tier for the module (starting it takes seconds); each test sends runs of its own and leaves the
    tier as it found it: three replicas up, all on the list."""
    started = start_tier(artifact_dir("e2e", __name__), replicas=3)
    try:
        yield started
    finally:
        stop_tier(started)


def counts_since(replica: Replica, before: dict[str, int], key: str) -> int:
    return replica.counts()[key] - before.get(key, 0)


def test_every_trace_is_profiled_once_complete_by_one_replica_as_offline(
    tier: Tier, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {r.name: r.counts() for r in tier.replicas}
    runs = agent_runs(30, seed=29)
    tier.send(runs, seed=1)
    wait_for_spans(tier, {run[0]["traceId"]: span_ids(run) for run in runs})
    offline = offline_profiles(runs, tmp_path / "sent.jsonl", capsys)

    by_replica: dict[str, int] = {replica.name: 0 for replica in tier.replicas}
    for run in runs:
        trace_id = run[0]["traceId"]
        profiles = {r.name: p for r in tier.replicas if (p := r.profile(trace_id)) is not None}
        assert len(profiles) == 1, f"trace {trace_id} profiled by {sorted(profiles)}"
        ((name, profile),) = profiles.items()
        by_replica[name] += 1
        assert profile["span_count"] == len(run)
        assert profile == offline[trace_id]
    assert all(by_replica.values()), f"every replica should get a share of the trace ids: {by_replica}"
    received = sum(counts_since(r, before[r.name], "received") for r in tier.replicas)
    assert received == sum(len(run) for run in runs), "each span reached one replica, once"
    assert sum(counts_since(r, before[r.name], "traces_profiled") for r in tier.replicas) == len(runs)


def test_a_replica_killed_mid_run_loses_what_it_held_and_gets_the_rest_when_back(tier: Tier) -> None:
    start = {r.name: r.counts() for r in tier.replicas}
    before = agent_runs(12, seed=30)
    tier.send(before, seed=2)
    sent_spans = sum(len(run) for run in before)
    wait_until(
        lambda: sum(counts_since(r, start[r.name], "received") for r in tier.replicas) == sent_spans,
        20,
        "tier 2 to get every span",
    )
    victim = max(tier.replicas, key=lambda r: counts_since(r, start[r.name], "received"))
    counts = victim.counts()
    held = counts["held_spans"] + counts["pending_spans"]
    # What it holds now (the quiet period keeps its traces there) is what README says a kill loses.
    assert held > 0
    log_seen = len(tier.collector.process.log_text())
    victim.kill()

    # While it starts again, tier 1 keeps taking spans; its share of them waits in tier 1's retry.
    victim.restart(wait=False)
    after = agent_runs(24, seed=31)
    tier.send(after, seed=3)
    victim.wait_listening()

    # Every later run is delivered, the killed replica's share through tier 1's retry once it is back; of the
    # first runs, those the other replicas held are delivered once their quiet period ends.
    wait_for_spans(tier, {run[0]["traceId"]: span_ids(run) for run in after}, timeout=90)
    arrived: dict[str, set[str]] = {}

    def first_runs_settled() -> bool:
        arrived.update({run[0]["traceId"]: tier.jaeger_span_ids(run[0]["traceId"]) for run in before})
        return sum(1 for ids in arrived.values() if ids) == len(before) - counts["held_traces"]

    wait_until(first_runs_settled, 40, "the other replicas to deliver their share of the first runs", interval=0.5)
    lost_traces = {trace_id for trace_id, ids in arrived.items() if not ids}
    assert sum(len(tier.sent[trace_id]) for trace_id in lost_traces) == held, "exactly what it held is lost"
    assert all(ids == span_ids(tier.sent[t]) for t, ids in arrived.items() if ids), "the others arrived whole"
    assert victim.counts()["received"] > 0, "the restarted replica got its share of what was sent while it was down"
    assert "Will retry the request" in tier.collector.process.log_text()[log_seen:], "tier 1 found it down"


def test_changing_the_replica_list_and_reloading_the_collector_loses_no_accepted_span(tier: Tier) -> None:
    runs = agent_runs(24, seed=40)
    sender = threading.Thread(target=tier.send, args=(runs,), kwargs={"seed": 4, "pause_s": 0.02, "concurrent": 4})
    sender.start()
    # Mid-run, the operator drops a replica from the static list and reloads, then adds it back.
    reloads = []
    for replicas in (tier.replicas[:2], tier.replicas):
        time.sleep(1.0)
        started = time.monotonic()
        tier.collector.reload(tier.config(replicas))
        reloads.append((started, time.monotonic()))
    sender.join(timeout=120)
    assert not sender.is_alive()
    assert all(run[0]["traceId"] in tier.sent for run in runs), (
        "tier 1 took every request, sent again while it reloaded"
    )

    wait_for_spans(tier, {run[0]["traceId"]: span_ids(run) for run in runs})

    # A trace whose requests were taken on both sides of a reload may be split, as README says of every change
    # of the list: between two replicas (each profiles its part, incomplete), or, held up by the reload past
    # the quiet period, into a profiled part and later spans forwarded unprofiled. Every other trace is
    # profiled once, whole, by one replica.
    def straddles(trace_id: str) -> bool:
        first, last = tier.accepted_at[trace_id]
        # tier 1's batch processor holds what it took for up to 200 ms before routing it
        return any(first < end + 0.5 and last > start - 0.5 for start, end in reloads)

    split = set()
    for run in runs:
        trace_id = run[0]["traceId"]
        counts = [p["span_count"] for r in tier.replicas if (p := r.profile(trace_id)) is not None]
        if counts != [len(run)]:
            split.add(trace_id)
            assert sum(counts) <= len(run), f"trace {trace_id}: no span profiled twice, parts {counts}"
    assert all(straddles(trace_id) for trace_id in split)
    assert len(split) < len(runs) / 2, f"only the traces in flight at a reload are split: {len(split)}"
    # The reloads took effect: what was sent while the list had two replicas went to those two only.
    dropped = tier.replicas[2]
    between = [
        run[0]["traceId"]
        for run in runs
        if tier.accepted_at[run[0]["traceId"]][0] > reloads[0][1]
        and tier.accepted_at[run[0]["traceId"]][1] < reloads[1][0]
    ]
    assert between, "some runs were sent while the list had two replicas"
    assert all(dropped.profile(trace_id) is None for trace_id in between)


def test_a_killed_replica_taken_off_the_list_loses_what_tier_1_was_retrying_for_it(tier: Tier) -> None:
    # What a DNS resolver does when a killed replica leaves the answer (the headless Service drops a Pod that
    # is not ready), done by hand: the list edited without it and the collector reloaded. The shipped file
    # retries per replica (`retry_on_failure` under `protocol.otlp`), so the batches waiting for the removed
    # replica are dropped with its exporter, not re-routed to the others.
    victim, survivors = tier.replicas[2], tier.replicas[:2]
    log_seen = len(tier.collector.process.log_text())
    victim.kill()
    try:
        while_down = agent_runs(24, seed=50)
        tier.send(while_down, seed=5)
        wait_until(
            lambda: "Will retry the request" in tier.collector.process.log_text()[log_seen:], 20, "tier 1 to retry"
        )
        tier.collector.reload(tier.config(survivors))
        after = agent_runs(24, seed=51)
        tier.send(after, seed=6)

        wait_for_spans(tier, {run[0]["traceId"]: span_ids(run) for run in after})
        routed_to_victim = set()

        def settled() -> bool:
            if any(r.counts()["held_spans"] + r.counts()["pending_spans"] for r in survivors):
                return False  # a survivor still holds some: its traces are not profiled yet
            routed_to_victim.clear()
            for run in while_down:
                trace_id = run[0]["traceId"]
                if not any(r.profile(trace_id) for r in survivors):
                    routed_to_victim.add(trace_id)
            delivered = {
                run[0]["traceId"]: span_ids(run) for run in while_down if run[0]["traceId"] not in routed_to_victim
            }
            return all(ids <= tier.jaeger_span_ids(t) for t, ids in delivered.items())

        wait_until(settled, 30, "the survivors' share of the runs sent while the replica was down", interval=0.5)
        assert routed_to_victim, "some runs were routed to the killed replica"
        assert all(not tier.jaeger_span_ids(trace_id) for trace_id in routed_to_victim), "dropped, not re-routed"
        assert "Dropping data" in tier.collector.process.log_text()[log_seen:]
    finally:  # the tier as it was: the replica back, on the list
        victim.restart()
        tier.collector.reload(tier.config(tier.replicas))
