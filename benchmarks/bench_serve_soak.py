"""Soak: ``otel-agent-profiler serve`` at a steady rate for 10 minutes (by default): does its memory plateau?

``serve`` runs as a subprocess forwarding over OTLP/gRPC to rotel (``--exporter blackhole``), as in
bench_serve.py. One client thread sends realistic agent traces (agent_traces.py) over OTLP/gRPC at
``--rate`` spans/s, in requests of ``--batch`` spans: a pool of traces is encoded once, and every pass over it
gets fresh trace ids, so every trace is new to ``serve`` and is assembled, profiled after the quiet period,
enriched and forwarded. A request answered UNAVAILABLE (pushback) is retried, as an OTLP exporter does.

Every ``--sample-interval`` seconds ``serve``'s resident set size (VmRSS) and its ``GET /health`` counts are
sampled. At the end the load stops, ``serve`` drains and is stopped with SIGTERM. Printed:

* RSS: the median of the last half of the samples against the median of the first half (without the first
  10% of the run, the warm-up), as a ratio: the baseline is the same process earlier in the same run.
  ``plateau: yes`` when the ratio is at most 1.10;
* the rate achieved against the target;
* spans sent (acknowledged by ``serve``), delivered (forwarded and acknowledged by the upstream), lost (sent
  and not delivered), rejected requests, and ``serve``'s exit code.

    python benchmarks/bench_serve_soak.py [--duration 600] [--rate 2000] [--batch 100] [--quick]

Everything listens on 127.0.0.1 only, on free ports; every wait is bounded in time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import EXPORT, HOST, encode_load, health, rss_bytes, start_rotel, start_serve
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PLATEAU_GOAL = 1.10
WARM_UP_SHARE = 0.10


@dataclass
class Sample:
    elapsed_s: float
    rss: int
    counts: dict


class SteadyLoad:
    """One client thread sending the pool at ``rate`` spans/s, with fresh trace ids on every pass."""

    def __init__(self, grpc_port: int, pool: list[ExportTraceServiceRequest], rate: float) -> None:
        self.pool = pool
        self.rate = rate
        self.sent = 0  # spans acknowledged
        self.rejected = 0  # requests answered with an error, then retried
        self._stop = threading.Event()
        self._channel = grpc.insecure_channel(f"{HOST}:{grpc_port}")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SteadyLoad:
        grpc.channel_ready_future(self._channel).result(timeout=20)
        self.started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> float:
        """Stop sending; returns the seconds the load ran."""
        self._stop.set()
        self._thread.join(120)
        self._channel.close()
        return time.monotonic() - self.started

    def _run(self) -> None:
        export = self._channel.unary_unary(EXPORT)
        passes = 0
        while not self._stop.is_set():
            passes += 1
            prefix = passes.to_bytes(4, "big")
            for request in self.pool:
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            span.trace_id = prefix + span.trace_id[4:]
                body = request.SerializeToString()
                spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                # Steady: each request leaves when the spans sent so far are due, never in a catch-up burst.
                due = self.started + self.sent / self.rate
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                while not self._stop.is_set():
                    try:
                        export(body, timeout=30)
                    except grpc.RpcError:
                        self.rejected += 1
                        self._stop.wait(0.1)
                    else:
                        self.sent += spans
                        break


def load_pool(min_spans: int, batch: int) -> list[ExportTraceServiceRequest]:
    bodies, _spans, _traces = encode_load(min_spans, batch)
    pool = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    for request in pool:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    if span.trace_id[:4] != bytes(4):  # the pass number goes there
                        raise SystemExit("the generated trace ids use their first 4 bytes")
    return pool


def sample_until(serve_pid: int, http_port: int, load: SteadyLoad, args: argparse.Namespace) -> list[Sample]:
    samples = []
    started = time.monotonic()
    next_report = args.duration / 10
    while (elapsed := time.monotonic() - started) < args.duration:
        samples.append(Sample(elapsed, rss_bytes(serve_pid), health(http_port)))
        if elapsed >= next_report:
            sample = samples[-1]
            print(
                f"  {elapsed:6.0f} s  RSS {sample.rss / 1e6:7.1f} MB  held {sample.counts['held_spans']:>7,} "
                f"+ pending {sample.counts['pending_spans']:>7,} spans  sent {load.sent:>11,}",
                flush=True,
            )
            next_report += args.duration / 10
        time.sleep(min(args.sample_interval, max(0.0, args.duration - elapsed)))
    return samples


def plateau(samples: list[Sample], duration_s: float) -> tuple[float, float, float]:
    """(median RSS of the first half after the warm-up, median RSS of the last half, last / first)."""
    half = duration_s / 2
    first = [s.rss for s in samples if duration_s * WARM_UP_SHARE <= s.elapsed_s < half]
    last = [s.rss for s in samples if s.elapsed_s >= half]
    if not first or not last:
        raise SystemExit("too few samples: lower --sample-interval or raise --duration")
    first_rss, last_rss = statistics.median(first), statistics.median(last)
    return first_rss, last_rss, last_rss / first_rss


def drain(http_port: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        counts = health(http_port)
        if counts["held_spans"] == 0 and counts["pending_spans"] == 0:
            return counts
        if time.monotonic() > deadline:
            return counts
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default: 600)")
    parser.add_argument("--rate", type=float, default=2000.0, help="spans per second (default: 2000)")
    parser.add_argument("--batch", type=int, default=100, help="spans per request (default: 100)")
    parser.add_argument("--pool-spans", type=int, default=20_000, help="spans in the pool sent over and over")
    parser.add_argument("--quiet-period", type=float, default=1.0, help="serve's quiet period in s (default: 1)")
    parser.add_argument("--sample-interval", type=float, default=5.0, help="seconds between samples (default: 5)")
    parser.add_argument("--quick", action="store_true", help="a 20 s run at 1000 spans/s, sampled every 0.5 s")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.rate, args.sample_interval, args.pool_spans = 20.0, 1000.0, 0.5, 5_000
    if min(args.duration, args.rate, args.batch, args.pool_spans, args.sample_interval) <= 0:
        parser.error("--duration, --rate, --batch, --pool-spans and --sample-interval must be positive")

    pool = load_pool(args.pool_spans, args.batch)
    print(
        f"load: {args.rate:,.0f} spans/s for {args.duration:g} s, OTLP/gRPC requests of <= {args.batch} spans "
        f"(agent traces, fresh trace ids on every pass over {len(pool):,} requests); serve's quiet period "
        f"{args.quiet_period:g} s; RSS sampled every {args.sample_interval:g} s"
    )
    with tempfile.TemporaryDirectory(prefix="bench-serve-soak-") as tmp:
        log_dir = Path(tmp)
        upstream, upstream_port, _ = start_rotel("rotel-upstream", log_dir)
        serve = None
        try:
            serve, http_port, serve_port = start_serve("serve", log_dir, upstream_port, args.quiet_period, 1000)
            load = SteadyLoad(serve_port, pool, args.rate).start()
            try:
                samples = sample_until(serve.pid, http_port, load, args)
            finally:
                ran_s = load.stop()
            counts = drain(http_port, 120)
            final_rss = rss_bytes(serve.pid)
            serve.stop(timeout=60)
            code = serve.popen.returncode
        finally:
            if serve is not None:
                serve.stop()
            upstream.stop()
    first_rss, last_rss, growth = plateau(samples, args.duration)
    peak = max(s.rss for s in samples)
    verdict = "yes" if growth <= PLATEAU_GOAL else "NO"
    print(
        f"RSS: first half {first_rss / 1e6:.1f} MB (median, after {WARM_UP_SHARE:.0%} warm-up), last half "
        f"{last_rss / 1e6:.1f} MB = {growth:.2f}x (plateau: {verdict}, goal <= {PLATEAU_GOAL:.2f}x); peak "
        f"{peak / 1e6:.1f} MB, after draining {final_rss / 1e6:.1f} MB"
    )
    achieved = load.sent / ran_s
    print(f"rate: {achieved:,.0f} spans/s achieved = {achieved / args.rate:.2f}x the target")
    delivered = counts["forwarded"]
    print(
        f"spans: sent {load.sent:,} (acknowledged by serve), delivered {delivered:,} (acknowledged by the "
        f"upstream), lost {load.sent - delivered:,}; serve counted {counts['failed']:,} not delivered, "
        f"{counts['traces_profiled']:,} traces profiled; rejected requests {load.rejected:,}; serve exited {code}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
