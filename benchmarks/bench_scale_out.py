"""Benchmark: throughput of the scale-out tier (tier 1 routing by trace id to three ``serve`` replicas) against
the same tier with one replica.

Both tiers run the real OpenTelemetry Collector that ``scripts/test`` builds, with
``collector-config/otelcol-tier1-loadbalancing.yaml`` as shipped except for its endpoints (free ports on
127.0.0.1) and its resolver (the static list its comment gives, since the replicas share one host and need a
port each): the baseline lists one ``serve`` replica, the candidate three. Each replica profiles without an
upstream, so what is timed is tier 1 plus the replicas profiling.

The load is realistic agent traces (agent_traces.py), encoded once per round before anything is timed as
OTLP/gRPC requests of ``--batch`` spans (the spans of a trace are consecutive, as an SDK's batch processor
sends them), with trace ids no earlier round used. ``--clients`` gRPC client threads send them to tier 1 as
fast as it takes them. Measured: spans/s from the first request until every span has been profiled by a
replica (``GET /health``: every span ``received``, nothing held), so the last traces' quiet period (``--quiet-period``)
is included. The rounds alternate the baseline and the candidate, so that other load on the machine affects
both alike; min and median of each are printed, and the ratio of the medians.

On a machine with few cores the replicas compete with tier 1, the client and each other for them: three
replicas help only as far as there are cores for them.

    python benchmarks/bench_scale_out.py [--spans 10000] [--repeat 3] [--clients 2] [--quick]

Exits 0 with a message, measuring nothing, when Jaeger's and the collector's builds are missing (run
``scripts/test`` once to build them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests.support

from bench_serve import Process, encode_load, free_ports, health, port_open, send_all, wait_for

from tests.support.backends import BackendNotInstalled
from tests.support.go_backends import otelcol_binary, tier1_collector_config

HOST = "127.0.0.1"
OTELCOL_READY = "Everything is ready"


class Tier:
    """Tier 1 (the collector) and ``replicas`` ``serve`` processes behind it."""

    def __init__(self, name: str, replicas: int, args: argparse.Namespace, log_dir: Path) -> None:
        self.replicas: list[tuple[Process, int]] = []
        grpc_ports = []
        for i in range(replicas):
            http_port, grpc_port = free_ports(2)
            argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(http_port)]
            argv += ["--grpc-port", str(grpc_port), "--quiet-period", str(args.quiet_period)]
            argv += ["--max-traces", "100000", "--max-pending-spans", "1000000"]
            process = Process(f"{name}-serve-{i}", argv, log_dir)
            ports = (http_port, grpc_port)
            wait_for(lambda ports=ports: all(map(port_open, ports)), 60, f"{name}-serve-{i}", process.popen)
            self.replicas.append((process, http_port))
            grpc_ports.append(grpc_port)
        health_port, self.grpc_port, http_port, nowhere = free_ports(4)
        config = tier1_collector_config(
            [f"{HOST}:{port}" for port in grpc_ports],
            upstream=f"{HOST}:{nowhere}",  # the applications' metrics: none are sent here
            health_port=health_port,
            grpc_port=self.grpc_port,
            http_port=http_port,
        )
        config_path = log_dir / f"{name}-otelcol.yaml"
        config_path.write_text(config)
        argv = [
            str(otelcol_binary()),
            f"--config={config_path}",
            "--config=yaml:service::telemetry::metrics::level: none",
        ]
        self.collector = Process(f"{name}-otelcol", argv, log_dir)
        wait_for(
            lambda: OTELCOL_READY in self.collector.log_path.read_text(errors="replace"),
            60,
            f"{name}-otelcol",
            self.collector.popen,
        )

    def taken(self) -> tuple[int, int, int]:
        """(spans received, spans still held or pending, spans that came after their trace was profiled) over
        the replicas."""
        received = held = late = 0
        for _, http_port in self.replicas:
            counts = health(http_port)
            received += counts["received"]
            held += counts["held_spans"] + counts["pending_spans"]
            late += counts["late"]
        return received, held, late

    def run(self, bodies: list[bytes], span_count: int, args: argparse.Namespace) -> tuple[float, int]:
        """(spans/s from the first request until every span was received and profiled, spans that came after
        their trace was profiled: a replica lets them through unprofiled)."""
        received_before, _, late_before = self.taken()
        started = time.perf_counter()
        send_all(self.grpc_port, bodies, args.clients, args.timeout)
        deadline = time.monotonic() + args.timeout
        while True:
            received, held, late = self.taken()
            if received - received_before >= span_count and held == 0:
                break
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the tier did not take every span in {args.timeout:.0f}s: {received - received_before}"
                )
            time.sleep(0.02)
        return span_count / (time.perf_counter() - started), late - late_before

    def stop(self) -> None:
        self.collector.stop()
        for process, _ in self.replicas:
            process.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000, help="spans per round (default: 10000)")
    parser.add_argument("--batch", type=int, default=100, help="spans per request (default: 100)")
    parser.add_argument("--clients", type=int, default=2, help="gRPC client threads (default: 2)")
    parser.add_argument("--replicas", type=int, default=3, help="replicas of the candidate tier (default: 3)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each tier (default: 3)")
    parser.add_argument("--quiet-period", type=float, default=1.0, help="serve's --quiet-period (default: 1.0)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per round (default: 300)")
    parser.add_argument("--quick", action="store_true", help="a small load, one round each (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.spans, args.repeat = 2_000, 1
    try:
        otelcol_binary()
    except BackendNotInstalled as err:
        print(f"skipped: {err}")
        return 0

    log_dir = Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    loads = []
    first_trace = 0
    for round_ in range(2 * args.repeat):  # fresh trace ids in every round: a replica would take old ones as late
        bodies, span_count, traces = encode_load(args.spans, args.batch, first_trace=first_trace, seed=29 + round_)
        loads.append((bodies, span_count))
        first_trace += traces

    tiers: list[Tier] = []
    rates: dict[int, list[float]] = {1: [], args.replicas: []}
    late = 0
    try:
        tiers = [Tier("one", 1, args, log_dir), Tier("tier", args.replicas, args, log_dir)]
        for round_ in range(args.repeat):
            for index, (tier, replicas) in enumerate(zip(tiers, (1, args.replicas), strict=True)):
                bodies, span_count = loads[2 * round_ + index]
                rate, late_spans = tier.run(bodies, span_count, args)
                rates[replicas].append(rate)
                late += late_spans
    finally:
        for tier in tiers:
            tier.stop()

    one, many = rates[1], rates[args.replicas]
    print(f"{args.spans} spans per round, {args.repeat} rounds each, {args.clients} clients, logs in {log_dir}")
    print(f"one replica:        min {min(one):8.0f}  median {statistics.median(one):8.0f} spans/s")
    print(f"{args.replicas} replicas:         min {min(many):8.0f}  median {statistics.median(many):8.0f} spans/s")
    if late:
        print(f"{late} spans came after their trace was profiled (a quiet period too short for this machine)")
    ratios = [m / o for m, o in zip(many, one, strict=True)]
    print(
        f"ratio of the medians {statistics.median(many) / statistics.median(one):.2f} "
        f"(per round: min {min(ratios):.2f}, median {statistics.median(ratios):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
