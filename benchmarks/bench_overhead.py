"""Benchmark: the profiler's per-span overhead, against the bare SDK, in the same run.

Two workloads: traces of 5 nested spans with 6 attributes each, made in a tight loop (the
shape of the usual SDK baseline; the attributes make every span a chat call to one model, so
the per-trace costs weigh on 5 spans only), and realistic
agent traces replayed with their own timestamps (agent_traces.py: nested agents, parallel
tools, chains of LLM calls). Compared, alternating and repeated:

* baseline: ``TracerProvider`` + ``BatchSpanProcessor`` with an exporter that does nothing, and
  again with an OTLP/gRPC exporter to a local rotel (``--export``; both by default);
* profiled: the same ``BatchSpanProcessor`` behind ``AgentProfilerSpanProcessor`` with its
  default settings, with profile metrics recorded into an SDK ``MeterProvider``.

The overhead goals (application thread at most 0.25x extra, total CPU at most 1.0x extra) are
meant for the pipeline users run, a ``BatchSpanProcessor`` exporting over OTLP. The do-nothing
exporter is a smaller baseline (no encoding, no network), so its ratios are a stricter bound;
they are printed too.

Each in two modes: steady, with a 5 ms pause after every 100 spans so that the profiler's
worker keeps up (an agent spends most of its time waiting on LLM calls and tools, so its spans
come in bursts far below the profiler's throughput), and saturated, a tight loop in which the
worker falls behind and the backlog of waiting traces grows (the garbage collector then has more
to traverse, and pays for it on whichever thread triggers it). There the trace cap
(``max_traces``, 1,000 by default) can push the oldest waiting traces out unprofiled, as it would
in an application; the report says how many traces were profiled when that happened.

Reported: CPU time of the application thread per span, and the process's total CPU time
per span once everything is exported (the profiler's worker included), both as ratios to the
baseline; and memory held per span while traces wait to complete.

    python benchmarks/bench_overhead.py [--traces 4000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_agent_profiler import AgentProfilerSpanProcessor
from otel_agent_profiler.plugin.export_accounting import AccountingSpanExporter

BASELINE = "baseline"
SPANS_ONLY = "profiled, enriched spans, metrics off"
WITH_METRICS = "profiled, enriched spans and metrics"
GOAL_APP_THREAD_EXTRA = 0.25
GOAL_TOTAL_CPU_EXTRA = 1.0
DEPTH = 5
#: Steady mode: a pause after every PACE_SPANS spans lets the profiler's worker catch up.
PACE_SPANS = 100
PACE_S = 0.005
PACED = "steady (a 5 ms pause after every 100 spans)"
SATURATED = "saturated (a tight loop; the profiler falls behind)"


class NullExporter(SpanExporter):
    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _batch(exporter: SpanExporter) -> BatchSpanProcessor:
    # A queue large enough that the tight loop drops nothing (the default 2048 would).
    return BatchSpanProcessor(exporter, max_queue_size=1_000_000, max_export_batch_size=4096, schedule_delay_millis=200)


def _agent_runs(traces: int) -> list[list[tuple[str, int, int, int | None, dict[str, object]]]]:
    """Realistic agent traces (see agent_traces.py) as (name, start, end, parent index, attributes)."""
    from agent_traces import generate_runs

    def value(v: dict[str, object]) -> object:
        ((kind, raw),) = v.items()
        if kind == "intValue":
            return int(raw)  # type: ignore[call-overload]
        if kind == "arrayValue":
            return [item["stringValue"] for item in raw["values"]]  # type: ignore[index]
        return raw

    runs = []
    for run in generate_runs(traces, seed=3):
        index = {span["spanId"]: i for i, span in enumerate(run)}
        runs.append(
            [
                (
                    span["name"],
                    int(span["startTimeUnixNano"]),
                    int(span["endTimeUnixNano"]),
                    index.get(span.get("parentSpanId")),
                    {kv["key"]: value(kv["value"]) for kv in span["attributes"]},
                )
                for span in run
            ]
        )
    return runs


def _pacer(paced: bool) -> Callable[[int], None]:
    """Called with the spans made so far: pauses after every ``PACE_SPANS`` when ``paced``."""
    next_pause = PACE_SPANS

    def pace(made: int) -> None:
        nonlocal next_pause
        if paced and made >= next_pause:
            next_pause = made + PACE_SPANS
            time.sleep(PACE_S)  # neither thread_time nor process_time counts the sleep

    return pace


def _replay(
    provider: TracerProvider,
    runs: list[list[tuple[str, int, int, int | None, dict[str, object]]]],
    paced: bool = False,
) -> float:
    """Make the SDK spans of recorded agent runs, with their own timestamps."""
    tracer = provider.get_tracer("bench")
    pace = _pacer(paced)
    made = 0
    started = time.thread_time()
    for run in runs:
        made += len(run)
        pace(made)
        spans = []
        for name, start, _, parent, attributes in run:
            context = None if parent is None else _ctx(spans[parent])
            spans.append(tracer.start_span(name, context=context, attributes=attributes, start_time=start))  # type: ignore[arg-type]
        for position in sorted(range(len(run)), key=lambda i: run[i][2]):
            spans[position].end(end_time=run[position][2])
    return time.thread_time() - started


def _workload(provider: TracerProvider, traces: int, paced: bool = False) -> float:
    tracer = provider.get_tracer("bench")
    pace = _pacer(paced)
    names = ("invoke_agent planner", "chat gpt-4o", "execute_tool search", "retrieval kb", "embeddings small")
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 80,
        "gen_ai.provider.name": "openai",
        "app.step": 3,
    }
    started = time.thread_time()
    for number in range(traces):
        pace(number * DEPTH)
        spans = []
        for depth in range(DEPTH):
            span = tracer.start_span(
                names[depth], attributes=attributes, context=None if not spans else _ctx(spans[-1])
            )
            spans.append(span)
        for span in reversed(spans):
            span.end()
    return time.thread_time() - started


def _ctx(parent):  # type: ignore[no-untyped-def]
    from opentelemetry.trace import set_span_in_context

    return set_span_in_context(parent)


def _make_exporter(otlp_endpoint: str | None) -> AccountingSpanExporter:
    # Counting wrapper: the check that every span was exported, whatever the destination.
    if otlp_endpoint is None:
        return AccountingSpanExporter(NullExporter())
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return AccountingSpanExporter(OTLPSpanExporter(endpoint=otlp_endpoint, insecure=True))


def _run(
    variant: str, traces: int, runs: list | None = None, otlp_endpoint: str | None = None, paced: bool = False
) -> tuple[float, float, int, int]:
    """Application-thread CPU, total CPU, spans exported and traces profiled, for one run."""
    exporter = _make_exporter(otlp_endpoint)
    provider = TracerProvider()
    meter_provider = None
    profiler = None
    trace_count = traces if runs is None else len(runs)
    if variant == BASELINE:
        provider.add_span_processor(_batch(exporter))
    else:
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        # The processor's defaults, as users run it. In the saturated mode its trace cap
        # (max_traces) can push the oldest waiting traces out unprofiled; the report says how many.
        profiler = AgentProfilerSpanProcessor(
            downstream=[_batch(exporter)], meter_provider=meter_provider, metrics_enabled=variant == WITH_METRICS
        )
        provider.add_span_processor(profiler)
    gc.collect()
    cpu_started = time.process_time()
    app_thread = _workload(provider, traces, paced) if runs is None else _replay(provider, runs, paced)
    provider.force_flush(timeout_millis=600_000)
    total_cpu = time.process_time() - cpu_started
    profiled = trace_count if profiler is None else profiler._profiled_traces
    provider.shutdown()
    if meter_provider is not None:
        meter_provider.shutdown()
    return app_thread, total_cpu, exporter.exported, profiled


def _memory_per_buffered_span(traces: int) -> tuple[float, float]:
    """Bytes held per ended span while its trace waits (its root is still open): all of it,
    and the part that is the profiler's own bookkeeping rather than the span object."""
    provider = TracerProvider()
    exporter = NullExporter()
    profiler = AgentProfilerSpanProcessor(downstream=[_batch(exporter)], metrics_enabled=False, max_traces=traces + 1)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("bench")
    roots = [tracer.start_span("root") for _ in range(traces)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    held = []
    for root in roots:
        for _ in range(DEPTH - 1):
            span = tracer.start_span("child", context=_ctx(root), attributes={"gen_ai.operation.name": "chat", "x": 1})
            span.end()
            held.append(span)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    spans = traces * (DEPTH - 1)
    total = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    ours = sum(
        stat.size_diff for stat in after.compare_to(before, "filename") if "otel_agent_profiler" in str(stat.traceback)
    )
    for root in roots:
        root.end()
    provider.shutdown()
    del held
    return total / spans, ours / spans


class Collector:
    """A real OTLP collector (rotel) that drops what it receives: the far end of an OTLP export."""

    def __enter__(self) -> str:
        import socket
        import subprocess

        import rotel

        ports = []
        for _ in range(2):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                ports.append(sock.getsockname()[1])
        binary = Path(rotel.__file__).parent / "rotel-agent"
        self._process = subprocess.Popen(
            [
                str(binary),
                "start",
                *("--otlp-grpc-endpoint", f"127.0.0.1:{ports[0]}"),
                *("--otlp-http-endpoint", f"127.0.0.1:{ports[1]}"),
                *("--exporter", "blackhole", "--otlp-exporter-endpoint", "http://127.0.0.1:9"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", ports[0])) == 0:
                    return f"127.0.0.1:{ports[0]}"
            time.sleep(0.05)
        raise SystemExit("rotel did not start")

    def __exit__(self, *_: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def _compare(label: str, traces: int, repeat: int, runs: list | None, otlp_endpoint: str | None, paced: bool) -> None:
    spans = sum(len(run) for run in runs) if runs is not None else traces * DEPTH
    for variant in (BASELINE, SPANS_ONLY, WITH_METRICS):
        _run(variant, max(1, traces // 4), runs[: max(1, len(runs) // 4)] if runs else None, otlp_endpoint, paced)
    app: dict[str, list[float]] = {variant: [] for variant in (BASELINE, SPANS_ONLY, WITH_METRICS)}
    cpu: dict[str, list[float]] = {variant: [] for variant in app}
    profiled: dict[str, list[int]] = {variant: [] for variant in app}
    for _ in range(repeat):
        for variant in app:
            thread_time, process_time, exported, traces_profiled = _run(variant, traces, runs, otlp_endpoint, paced)
            assert exported == spans, f"{variant}: exported {exported} of {spans} spans"
            app[variant].append(thread_time)
            cpu[variant].append(process_time)
            profiled[variant].append(traces_profiled)

    per = 1e6 / spans
    b_app, b_cpu = statistics.median(app[BASELINE]), statistics.median(cpu[BASELINE])
    destination = "OTLP/gRPC to a real collector" if otlp_endpoint else "an exporter that does nothing"
    mode = PACED if paced else SATURATED
    print(f"\n{label}, exported to {destination}, {mode}: {spans:,} spans per run; median of {repeat}")
    print(
        f"  baseline (BatchSpanProcessor alone): application thread {b_app * per:.1f} us/span, "
        f"total CPU {b_cpu * per:.1f} us/span"
    )
    trace_count = traces if runs is None else len(runs)
    for variant in (SPANS_ONLY, WITH_METRICS):
        p_app, p_cpu = statistics.median(app[variant]), statistics.median(cpu[variant])
        fewest = min(profiled[variant])
        shed = "" if fewest == trace_count else f" (cap reached: at least {fewest:,} of {trace_count:,} profiled)"
        print(f"  {variant}:{shed}")
        print(
            f"    application thread {p_app * per:6.1f} us/span -> {p_app / b_app - 1:+.2f}x extra"
            f" (goal <= {GOAL_APP_THREAD_EXTRA:.2f}x)"
        )
        print(
            f"    total CPU          {p_cpu * per:6.1f} us/span -> {p_cpu / b_cpu - 1:+.2f}x extra"
            f" (goal <= {GOAL_TOTAL_CPU_EXTRA:.2f}x)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=4000, help="traces per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default: %(default)s)")
    parser.add_argument(
        "--export",
        choices=("null", "otlp", "both"),
        default="both",
        help="where spans go: an exporter that does nothing, OTLP to a local rotel, or both (default)",
    )
    parser.add_argument(
        "--mode",
        choices=("steady", "saturated", "both"),
        default="both",
        help=(
            "steady: a 5 ms pause after every 100 spans, so the profiler keeps up, as in an agent that waits on "
            "its LLM calls; saturated: a tight loop, where the profiler's backlog grows; or both (default)"
        ),
    )
    args = parser.parse_args()
    agent_traces = max(1, args.traces // 6)
    runs = _agent_runs(agent_traces)
    chain_label = f"{args.traces:,} traces of {DEPTH} nested spans, 6 attributes each"
    agent_label = f"{agent_traces:,} realistic agent traces (agent_traces.py shapes)"
    modes = {"steady": (True,), "saturated": (False,), "both": (True, False)}[args.mode]
    if args.export in ("null", "both"):
        for paced in modes:
            _compare(chain_label, args.traces, args.repeat, None, None, paced)
            _compare(agent_label, agent_traces, args.repeat, runs, None, paced)
    if args.export in ("otlp", "both"):
        with Collector() as endpoint:
            for paced in modes:
                _compare(chain_label, args.traces, args.repeat, None, endpoint, paced)
                _compare(agent_label, agent_traces, args.repeat, runs, endpoint, paced)
    total, ours = _memory_per_buffered_span(min(args.traces, 2000))
    print(f"\nmemory per buffered span: {total:,.0f} bytes held in all, {ours:,.0f} bytes of it the profiler's own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
