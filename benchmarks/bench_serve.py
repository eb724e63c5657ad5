"""Benchmark: throughput of ``otel-agent-profiler serve`` against rotel passing the same load straight through.

The load is realistic agent traces (agent_traces.py: nested agents, parallel tools, chains of LLM
calls) encoded once, before anything is timed, as OTLP/gRPC ``ExportTraceServiceRequest`` bodies of
``--batch`` spans each (the spans of a trace are consecutive, as an SDK's batch processor sends them).
The same bytes are sent, as fast as ``--clients`` gRPC client threads can (one channel each), to:

* rotel (the OTLP collector, Rust) with ``--exporter blackhole``: the baseline;
* ``otel-agent-profiler serve`` (a subprocess) forwarding to a second rotel with ``--exporter
  blackhole``, so assembling, profiling, enriching and forwarding are all paid for.

With ``--protocol http`` the same bodies go as OTLP/HTTP protobuf (``POST /v1/traces``, one
keep-alive connection per client thread) to both.

Measured, client side: accepted spans/s until every request is acknowledged (ingest rate). For serve
also the end-to-end rate: until ``GET /health`` shows every span profiled and forwarded upstream
(this includes the last trace's quiet period, ``--quiet-period``). Goals: serve ingests at least 50%
of rotel's rate on the same machine, in the same run, and serve's ingest rate in every round is within
15% of the median of the rounds (min, median and max are printed).

The client is Python: rotel's figure is what this client gets through, which grows with
``--clients`` (on a 2-CPU machine: ~51k spans/s with 2 threads, ~77k with 4, ~94k with 8), while
serve's falls as more threads compete with it for the CPUs. Compare ratios at the same ``--clients``
only, and read a high ratio at few clients as the client holding rotel back.

Many connections: ``--burst-clients`` (50) client threads, each with its own connection, send
``--burst-requests`` small requests (5 spans) in all, over HTTP (every other request on a new
connection) and over gRPC, to a fresh serve;
every answer other than 200 / OK, every reset and every refused connection is counted (goal: none).

Memory per in-flight span: a fresh serve with a quiet period long enough that no trace completes
receives ``--memory-spans`` spans; its resident set size (VmRSS in /proc/<pid>/status) before and
after, divided by the spans it holds.

    python benchmarks/bench_serve.py [--spans 100000] [--clients 4] [--repeat 5] [--protocol grpc] [--quick]

The rounds alternate rotel and serve, and the medians are reported, so that other load on the
machine affects both alike.

Everything listens on 127.0.0.1 only, on free ports; every wait is bounded in time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_runs, otlp_document

from otel_agent_profiler.adapters.otlp_proto import request_from_otlp_json

HOST = "127.0.0.1"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GOAL = 0.50
#: Serve's ingest rate in every round is within this fraction of the median of the rounds.
SPREAD_GOAL = 0.15
_RESERVED = {4317, 4318}


# --------------------------------------------------------------------------------------------------------------
# the load


def encode_load(min_spans: int, batch: int, first_trace: int = 0, seed: int = 7) -> tuple[list[bytes], int, int]:
    """Whole agent runs, at least ``min_spans`` spans, as serialized requests of ``batch`` spans each.

    Returns (request bodies, span count, trace count). Trace ids start after ``first_trace``.
    """
    spans: list[dict] = []
    traces = 0
    round_ = 0
    while len(spans) < min_spans:
        start = 1_760_000_000_000_000_000 + round_ * 10**13
        for run in generate_runs(100, seed=seed + round_, start_ns=start, first_trace=first_trace + traces):
            spans.extend(run)
            traces += 1
        round_ += 1
    bodies = []
    for i in range(0, len(spans), batch):
        document = otlp_document(spans[i : i + batch])
        bodies.append(request_from_otlp_json(json.dumps(document)).SerializeToString())
    return bodies, len(spans), traces


def spans_in(body: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


# --------------------------------------------------------------------------------------------------------------
# processes


def free_ports(count: int) -> list[int]:
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket()
            held.append(sock)
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
            if port not in _RESERVED:
                ports.append(port)
    finally:
        for sock in held:
            sock.close()
    return ports


def port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_for(probe: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if process.poll() is not None:
            raise SystemExit(f"{what}: the process exited with code {process.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


class Process:
    """A subprocess in its own process group, output to a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ROTEL_"))}
        with self.log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=log_dir,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.popen.wait(timeout=10)

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.popen.pid, sig)  # the group this benchmark created (start_new_session)
        except (ProcessLookupError, PermissionError):
            self.popen.send_signal(sig)


def start_rotel(name: str, log_dir: Path) -> tuple[Process, int, int]:
    """rotel-agent with OTLP receivers on free ports and the blackhole exporter; returns (process, gRPC port,
    HTTP port)."""
    import rotel

    binary = Path(rotel.__file__).parent / "rotel-agent"
    grpc_port, http_port = free_ports(2)
    argv = [
        str(binary),
        "start",
        *("--otlp-grpc-endpoint", f"{HOST}:{grpc_port}"),
        *("--otlp-http-endpoint", f"{HOST}:{http_port}"),
        *("--pid-file", str(log_dir / f"{name}.pid")),
        *("--log-file", str(log_dir / f"{name}.agent.log")),
        *("--exporter", "blackhole"),
    ]
    process = Process(name, argv, log_dir)
    wait_for(lambda: port_open(grpc_port) and port_open(http_port), 20, f"{name} to listen", process.popen)
    return process, grpc_port, http_port


def start_serve(name: str, log_dir: Path, upstream_grpc_port: int, quiet_period: float, max_traces: int):
    http_port, grpc_port = free_ports(2)
    argv = [
        sys.executable,
        "-m",
        "otel_agent_profiler",
        "serve",
        *("--host", HOST, "--http-port", str(http_port), "--grpc-port", str(grpc_port)),
        *("--upstream", f"http://{HOST}:{upstream_grpc_port}", "--upstream-protocol", "grpc"),
        *("--quiet-period", str(quiet_period), "--max-traces", str(max_traces)),
        *("--max-request-bytes", str(16 * 1024 * 1024), "--metrics-interval", "5"),
    ]
    process = Process(name, argv, log_dir)
    wait_for(lambda: port_open(http_port) and port_open(grpc_port), 60, f"{name} to listen", process.popen)
    return process, http_port, grpc_port


def health(http_port: int) -> dict:
    with urllib.request.urlopen(f"http://{HOST}:{http_port}/health", timeout=10) as response:
        return json.loads(response.read())["counts"]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------------------------------------------
# sending


def send_all(grpc_port: int, bodies: list[bytes], clients: int, timeout: float) -> float:
    """Send every body over ``clients`` threads (one channel each); returns seconds until all were acknowledged.

    A request answered with an error fails the benchmark: only accepted spans count.
    """
    channels = [grpc.insecure_channel(f"{HOST}:{grpc_port}") for _ in range(clients)]
    try:
        calls = [channel.unary_unary(EXPORT) for channel in channels]  # bytes in, bytes out
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=20)
        for call in calls:  # one warm-up round trip per channel: connection set up before the clock starts
            call(b"", timeout=20)
        next_index = 0
        lock = threading.Lock()
        errors: list[str] = []
        deadline = time.monotonic() + timeout

        def worker(call) -> None:  # type: ignore[no-untyped-def]
            nonlocal next_index
            while True:
                with lock:
                    index = next_index
                    next_index += 1
                if index >= len(bodies) or errors:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    errors.append(repr(TimeoutError(f"sending took longer than {timeout:.0f}s")))
                    return
                try:
                    call(bodies[index], timeout=min(remaining, 60))
                except grpc.RpcError as exc:
                    errors.append(repr(exc))
                    return

        return _timed_senders(worker, calls, timeout, errors)
    finally:
        for channel in channels:
            channel.close()


def _timed_senders(worker: Callable[[Any], None], clients: Sequence[Any], timeout: float, errors: list[str]) -> float:
    """Seconds for one thread per client to run ``worker(client)``; exits if a request failed."""
    threads = [threading.Thread(target=worker, args=(client,), daemon=True) for client in clients]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 60)
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"a request failed: {errors[0]}")
    return elapsed


def send_all_http(http_port: int, bodies: list[bytes], clients: int, timeout: float) -> float:
    """As ``send_all``, over OTLP/HTTP protobuf: one keep-alive connection per client thread."""
    headers = {"Content-Type": "application/x-protobuf"}
    connections = [http.client.HTTPConnection(HOST, http_port, timeout=60) for _ in range(clients)]
    try:
        for connection in connections:  # connected before the clock starts
            connection.request("GET", "/health")
            connection.getresponse().read()
        next_index = 0
        lock = threading.Lock()
        errors: list[str] = []
        deadline = time.monotonic() + timeout

        def worker(connection: http.client.HTTPConnection) -> None:
            nonlocal next_index
            while True:
                with lock:
                    index = next_index
                    next_index += 1
                if index >= len(bodies) or errors:
                    return
                if time.monotonic() > deadline:
                    errors.append(f"sending took longer than {timeout:.0f}s")
                    return
                try:
                    connection.request("POST", "/v1/traces", bodies[index], headers)
                    response = connection.getresponse()
                    response.read()
                except OSError as exc:
                    errors.append(repr(exc))
                    return
                if response.status != 200:
                    errors.append(f"HTTP {response.status}")
                    return

        return _timed_senders(worker, connections, timeout, errors)
    finally:
        for connection in connections:
            connection.close()


def burst(http_port: int, grpc_port: int, clients: int, requests: int, body: bytes) -> dict[str, dict[str, int]]:
    """``clients`` threads, a connection each, send ``requests`` requests in all over HTTP, then over gRPC.

    Returns, per protocol, how many answers of each kind: "ok", an HTTP status or gRPC code, "reset",
    "refused", or another exception's name.
    """
    outcomes: dict[str, dict[str, int]] = {"http": {}, "grpc": {}}
    lock = threading.Lock()

    def count(protocol: str, outcome: str) -> None:
        with lock:
            outcomes[protocol][outcome] = outcomes[protocol].get(outcome, 0) + 1

    def http_client(share: int) -> None:
        # Every other request on a new connection: keep-alive traffic and accepting under load, both.
        connection = http.client.HTTPConnection(HOST, http_port, timeout=30)
        try:
            for number in range(share):
                if number % 2:
                    connection.close()
                    connection = http.client.HTTPConnection(HOST, http_port, timeout=30)
                try:
                    connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
                    response = connection.getresponse()
                    response.read()
                    count("http", "ok" if response.status == 200 else f"HTTP {response.status}")
                except ConnectionResetError:
                    count("http", "reset")
                    connection.close()
                except ConnectionRefusedError:
                    count("http", "refused")
                except (OSError, http.client.HTTPException) as exc:
                    count("http", type(exc).__name__)
                    connection.close()
        finally:
            connection.close()

    def grpc_client(share: int) -> None:
        with grpc.insecure_channel(f"{HOST}:{grpc_port}") as channel:
            call = channel.unary_unary(EXPORT)
            for _ in range(share):
                try:
                    call(body, timeout=30)
                    count("grpc", "ok")
                except grpc.RpcError as exc:
                    count("grpc", exc.code().name)  # type: ignore[attr-defined]

    for client in (http_client, grpc_client):
        shares = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]
        threads = [threading.Thread(target=client, args=(share,), daemon=True) for share in shares]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    return outcomes


# --------------------------------------------------------------------------------------------------------------
# the measurements


def throughput(bodies: list[bytes], span_count: int, trace_count: int, args: argparse.Namespace, log_dir: Path):
    def send(grpc_port: int, http_port: int) -> float:
        if args.protocol == "http":
            return send_all_http(http_port, bodies, args.clients, args.timeout)
        return send_all(grpc_port, bodies, args.clients, args.timeout)

    rotel, rotel_port, rotel_http_port = start_rotel("rotel-baseline", log_dir)
    try:
        rotel_s = send(rotel_port, rotel_http_port)
    finally:
        rotel.stop()

    upstream, upstream_port, _ = start_rotel("rotel-upstream", log_dir)
    serve = None
    try:
        serve, http_port, serve_port = start_serve(
            "serve", log_dir, upstream_port, args.quiet_period, max(1000, 2 * trace_count)
        )
        started = time.perf_counter()
        ingest_s = send(serve_port, http_port)
        deadline = time.monotonic() + args.timeout
        counts: dict = {}
        while True:
            counts = health(http_port)
            if counts["forwarded"] >= span_count and counts["held_spans"] == 0 and counts["pending_spans"] == 0:
                break
            if serve.popen.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not profile and forward everything: {counts}\n{serve.log_tail()}")
            time.sleep(0.02)
        end_to_end_s = time.perf_counter() - started
    finally:
        if serve is not None:
            serve.stop()
        upstream.stop()
    if counts["received"] != span_count or counts["failed"] or counts["invalid"] or counts["rejected_requests"]:
        raise SystemExit(f"serve lost or refused spans: {counts}")
    return rotel_s, ingest_s, end_to_end_s, counts


def memory_per_span(args: argparse.Namespace, log_dir: Path) -> tuple[int, int, int]:
    """(spans held, RSS before, RSS after) for a serve holding ``--memory-spans`` spans of open traces."""
    warmup, _, warmup_traces = encode_load(1, args.batch, first_trace=10_000_000, seed=99)
    bodies, span_count, trace_count = encode_load(args.memory_spans, args.batch, first_trace=20_000_000, seed=11)
    upstream, upstream_port, _ = start_rotel("rotel-upstream-memory", log_dir)
    serve = None
    try:
        serve, http_port, serve_port = start_serve(
            "serve-memory", log_dir, upstream_port, 3600.0, 2 * (trace_count + warmup_traces) + 1000
        )
        send_all(serve_port, warmup, 1, args.timeout)  # code paths and buffers warmed up, then the baseline
        time.sleep(0.5)
        before = rss_bytes(serve.pid)
        send_all(serve_port, bodies, args.clients, args.timeout)
        time.sleep(0.5)
        after = rss_bytes(serve.pid)
        counts = health(http_port)
        held = counts["held_spans"] - sum(spans_in(body) for body in warmup)
        if held != span_count or counts["profiled"]:
            raise SystemExit(f"serve does not hold the spans as expected: {counts}")
        return held, before, after
    finally:
        if serve is not None:
            serve.stop()
        upstream.stop()


def many_connections(args: argparse.Namespace, log_dir: Path) -> dict[str, dict[str, int]]:
    """``burst`` against a fresh serve (forwarding to rotel); fails if serve does not account for every request."""
    body = encode_load(1, 5, first_trace=30_000_000, seed=5)[0][0]
    upstream, upstream_port, _ = start_rotel("rotel-upstream-burst", log_dir)
    serve = None
    try:
        serve, http_port, serve_port = start_serve("serve-burst", log_dir, upstream_port, args.quiet_period, 10_000)
        outcomes = burst(http_port, serve_port, args.burst_clients, args.burst_requests, body)
        accepted = sum(protocol.get("ok", 0) for protocol in outcomes.values())
        counts = health(http_port)
        if counts["received"] != accepted * spans_in(body):
            raise SystemExit(f"serve counted {counts['received']} spans, the clients saw {accepted} requests accepted")
        return outcomes
    finally:
        if serve is not None:
            serve.stop()
        upstream.stop()


def spread(values: Sequence[float]) -> float:
    """The largest deviation of ``values`` from their median, as a fraction of it."""
    median = statistics.median(values)
    return max(abs(v - median) for v in values) / median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=100_000, help="spans sent to each target (default: 100000)")
    parser.add_argument("--batch", type=int, default=200, help="spans per request (default: 200)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent gRPC client threads (default: 4)")
    parser.add_argument("--memory-spans", type=int, default=50_000, help="spans held for the memory figure")
    parser.add_argument("--quiet-period", type=float, default=0.5, help="serve's quiet period in s (default: 0.5)")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on each phase in s (default: 600)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds, rotel then serve; medians (default: 5)")
    parser.add_argument(
        "--protocol", choices=("grpc", "http"), default="grpc", help="how the load is sent (default: grpc)"
    )
    parser.add_argument("--burst-clients", type=int, default=50, help="connections at once (default: 50)")
    parser.add_argument("--burst-requests", type=int, default=6000, help="small requests they send (default: 6000)")
    parser.add_argument(
        "--quick", action="store_true", help="small load (5000 spans and held, 2 rounds, 500 requests): a smoke test"
    )
    args = parser.parse_args()
    if args.quick:
        args.spans = min(args.spans, 5_000)
        args.memory_spans = min(args.memory_spans, 5_000)
        args.repeat = 2
        args.burst_requests = min(args.burst_requests, 500)
    numbers = (args.spans, args.batch, args.clients, args.memory_spans, args.repeat, args.burst_clients)
    if min(*numbers, args.burst_requests) < 1:
        parser.error("--spans, --batch, --clients, --memory-spans, --repeat and --burst-* must be positive")

    started = time.perf_counter()
    bodies, span_count, trace_count = encode_load(args.spans, args.batch)
    size = sum(len(body) for body in bodies)
    print(
        f"load: {span_count:,} spans in {trace_count:,} agent traces, {len(bodies):,} OTLP/gRPC requests of "
        f"<= {args.batch} spans ({size / 1e6:.1f} MB protobuf) over {args.protocol}, {args.clients} client threads; "
        f"encoded in {time.perf_counter() - started:.1f} s"
    )
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        log_dir = Path(tmp)
        rounds = []
        for number in range(1, args.repeat + 1):
            rotel_s, ingest_s, end_to_end_s, counts = throughput(bodies, span_count, trace_count, args, log_dir)
            rates = (span_count / rotel_s, span_count / ingest_s, span_count / end_to_end_s)
            rounds.append(rates)
            if args.repeat > 1:
                print(
                    f"  round {number}: rotel {rates[0]:,.0f}, serve ingest {rates[1]:,.0f}, end to end "
                    f"{rates[2]:,.0f} spans/s (ingest ratio {rates[1] / rates[0]:.2f})"
                )
        rotel_rate, ingest_rate, end_to_end_rate = (statistics.median(r[i] for r in rounds) for i in range(3))
        which = f"median of {args.repeat} rounds, " if args.repeat > 1 else ""
        print(f"rotel (blackhole)              {rotel_rate:>12,.0f} spans/s  ({which}{span_count / rotel_rate:.2f} s)")
        print(
            f"serve ingest (acknowledged)    {ingest_rate:>12,.0f} spans/s  ({which}{span_count / ingest_rate:.2f} s)"
        )
        print(
            f"serve end to end (profiled and forwarded) {end_to_end_rate:,.0f} spans/s  ({which}"
            f"{span_count / end_to_end_rate:.2f} s, incl. the {args.quiet_period:g} s quiet period; "
            f"{counts['traces_profiled']:,} traces profiled)"
        )
        ratio = ingest_rate / rotel_rate
        verdict = "met" if ratio >= GOAL else "NOT met"
        print(f"ratio serve/rotel: ingest {ratio:.2f}, end to end {end_to_end_rate / rotel_rate:.2f} ", end="")
        print(f"(goal >= {GOAL:.2f}: {verdict})")
        for name, index in (("rotel", 0), ("serve ingest", 1), ("serve end to end", 2)):
            values = [r[index] for r in rounds]
            print(
                f"rounds, {name}: min {min(values):,.0f}, median {statistics.median(values):,.0f}, "
                f"max {max(values):,.0f} spans/s; spread {spread(values):.0%} of the median"
            )
        ingest_spread = spread([r[1] for r in rounds])
        print(f"serve ingest spread: {ingest_spread:.0%} (goal <= {SPREAD_GOAL:.0%}: ", end="")
        print("met)" if ingest_spread <= SPREAD_GOAL else "NOT met)")

        outcomes = many_connections(args, log_dir)
        failures = sum(n for protocol in outcomes.values() for outcome, n in protocol.items() if outcome != "ok")
        print(
            f"{args.burst_clients} connections at once, {args.burst_requests:,} small requests over HTTP, as many "
            f"over gRPC: "
            f"{outcomes} ({failures} not accepted; goal 0: {'met' if not failures else 'NOT met'})"
        )

        held, before, after = memory_per_span(args, log_dir)
        per_span = (after - before) / held
        print(
            f"memory per in-flight span: {per_span:,.0f} bytes ({held:,} spans held; serve RSS "
            f"{before / 1e6:.1f} MB -> {after / 1e6:.1f} MB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
