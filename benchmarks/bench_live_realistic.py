"""Benchmark: the live profiler's CPU on realistic agent traces, exported over OTLP/gRPC to a real collector.

Each trace has 12 spans, as an instrumented agent makes them: an ``invoke_agent`` root, a memory
lookup, three LLM calls with the GenAI attributes opentelemetry-instrumentation-openai writes (one
streaming, with chunk events), an HTTP ``POST`` span under each LLM call (what the httpx
instrumentation adds), and two tool calls, one with an embedding and a retrieval below it. The
spans carry their own timestamps (seconds-long runs), so the profiles are those of real runs.

Compared, alternating, each run in a fresh process:

* bare: ``TracerProvider`` -> ``BatchSpanProcessor`` (its defaults) -> ``OTLPSpanExporter`` (gRPC)
  -> rotel;
* profiled: the same ``BatchSpanProcessor`` behind ``AgentProfilerSpanProcessor`` with its defaults,
  the profile metrics going to an SDK ``MeterProvider`` whose periodic reader exports them over
  OTLP/gRPC to the same collector (flushed once at the end of the run, inside the timing);
* profiled with metrics off, profiled with enriched spans off, and profiled with both off
  (``--variants all``): where the metrics' share and the added attributes' share (building the
  copies, encoding them) show, and what the analysis and the hand-over cost alone.

``--before DIR`` also runs the profiled variants with the package of another checkout (an earlier
commit, say from ``git worktree add``), alternating with the rest: before and after are then
measured in the same session, on the same load.

The application pauses 3 ms after every trace: an agent spends most of its time waiting on its LLM
calls and tools, so the profiler's worker keeps up, as it does in an application (a run of 12
spans in a few milliseconds is already far faster than any agent makes them); ``--pause-ms`` sets
another pause, to see how the figures move with the rate of traces. Each run makes a
warm-up of 100 traces first (imports, connections), then 24,000 spans, and stops the clock once
every span reached the collector. Reported per span: the process's CPU time (every thread: the
application's, the profiler's worker, the batch processor's, gRPC's) and the CPU time of the
thread that creates the spans, min and median over the runs, and each as a ratio to the bare
pipeline's (min to min, median to median). The goals: at most +0.6x process CPU and +0.10x on
the application thread. Where Linux shows each thread's CPU time (``/proc/self/task``), also
the profiler's worker and the batch processor's thread (which encodes and sends the spans): where
the rest of the extra CPU goes. And the garbage collector's CPU time, by the thread it ran on: a
collection runs on whichever thread's allocation sets it off, so the profiler's allocations decide
which thread pays for collections (the application's included), not only how many there are.

    python benchmarks/bench_live_realistic.py [--spans 24000] [--repeat 5] [--variants all] [--before DIR]
        [--pause-ms 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

BARE = "bare"
PROFILED = "profiled"
NO_METRICS = "profiled-no-metrics"
NO_ENRICH = "profiled-no-enrich"
ANALYSIS_ONLY = "profiled-no-metrics-no-enrich"
LABELS = {
    BARE: "bare SDK pipeline (BatchSpanProcessor -> OTLP/gRPC)",
    PROFILED: "profiled (defaults: enriched spans and metrics)",
    NO_METRICS: "profiled, metrics off",
    NO_ENRICH: "profiled, enriched spans off",
    ANALYSIS_ONLY: "profiled, metrics and enriched spans off",
}
BEFORE = " (before)"
GOAL_PROCESS_EXTRA = 0.6
GOAL_APP_THREAD_EXTRA = 0.10
SPANS_PER_TRACE = 12
WARM_UP_TRACES = 100
PAUSE_EVERY_TRACES = 1
PAUSE_MS = 3.0
MS = 1_000_000

# (name, parent index, kind, start offset ms, duration ms, attributes, chunk events)
SpanShape = tuple[str, int | None, str, float, float, dict[str, Any], int]


def _chat(model: str, input_tokens: int, output_tokens: int, streaming: bool, number: int) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": f"{model}-2025-01-01",
        "gen_ai.response.id": f"chatcmpl-{number:012x}",
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
        "gen_ai.usage.cache_read.input_tokens": input_tokens // 4,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.is_streaming": streaming,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "server.address": "api.openai.com",
        "server.port": 443,
    }


def _http() -> dict[str, Any]:
    return {
        "http.request.method": "POST",
        "url.full": "https://api.openai.com/v1/chat/completions",
        "server.address": "api.openai.com",
        "server.port": 443,
        "network.protocol.version": "1.1",
        "http.response.status_code": 200,
    }


def _tool(name: str, number: int) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": f"call_{number:010x}",
        "gen_ai.tool.type": "function",
    }


def trace_shape(number: int) -> list[SpanShape]:
    """The 12 spans of agent run ``number`` (a little variation between runs, as in real ones)."""
    jitter = number % 7
    first = 400 + 30 * jitter
    second = 900 + 50 * jitter
    return [
        (
            "invoke_agent support_agent",
            None,
            "internal",
            0,
            3600 + 60 * jitter,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_agent"},
            0,
        ),
        (
            "SELECT agent_memory",
            0,
            "client",
            1,
            8,
            {"db.system": "postgresql", "db.collection.name": "agent_memory", "db.operation.name": "SELECT"},
            0,
        ),
        ("chat gpt-4o-mini", 0, "client", 10, first, _chat("gpt-4o-mini", 2400 + jitter, 60, False, 3 * number), 0),
        ("POST", 2, "client", 11, first - 2, _http(), 0),
        ("execute_tool search_kb", 0, "internal", 15 + first, 300, _tool("search_kb", 2 * number), 0),
        (
            "embeddings text-embedding-3-small",
            4,
            "client",
            16 + first,
            80,
            {
                "gen_ai.operation.name": "embeddings",
                "gen_ai.request.model": "text-embedding-3-small",
                "gen_ai.usage.input_tokens": 40,
            },
            0,
        ),
        (
            "retrieval kb",
            4,
            "client",
            100 + first,
            200,
            {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb", "db.system": "qdrant"},
            0,
        ),
        ("chat gpt-4o", 0, "client", 320 + first, second, _chat("gpt-4o", 5200, 240, True, 3 * number + 1), 4),
        ("POST", 7, "client", 321 + first, second - 2, _http(), 0),
        ("execute_tool get_weather", 0, "internal", 330 + first + second, 150, _tool("get_weather", 2 * number + 1), 0),
        (
            "chat gpt-4o-mini",
            0,
            "client",
            490 + first + second,
            700,
            _chat("gpt-4o-mini", 6100, 180, False, 3 * number + 2),
            0,
        ),
        ("POST", 10, "client", 491 + first + second, 698, _http(), 0),
    ]


# -- one run (a child process) ------------------------------------------------------------------


def _run(variant: str, endpoint: str, spans: int, pause_s: float) -> dict[str, Any]:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind, set_span_in_context

    from otel_agent_profiler.plugin.export_accounting import AccountingSpanExporter

    kinds = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
    exporter = AccountingSpanExporter(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    batch = BatchSpanProcessor(exporter)
    provider = TracerProvider()
    meter_provider = None
    profiler = None
    if variant == BARE:
        provider.add_span_processor(batch)
    else:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        from otel_agent_profiler import AgentProfilerSpanProcessor

        reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, insecure=True))
        meter_provider = MeterProvider(metric_readers=[reader])
        profiler = AgentProfilerSpanProcessor(
            downstream=[batch],
            meter_provider=meter_provider,
            metrics_enabled=variant not in (NO_METRICS, ANALYSIS_ONLY),
            enrich_spans=variant not in (NO_ENRICH, ANALYSIS_ONLY),
        )
        provider.add_span_processor(profiler)
    tracer = provider.get_tracer("bench_live_realistic")
    shapes = [trace_shape(number) for number in range(64)]

    def make(traces: int, first: int) -> None:
        base = time.time_ns()
        for number in range(first, first + traces):
            if number % PAUSE_EVERY_TRACES == 0:
                time.sleep(pause_s)  # neither thread_time nor process_time counts the sleep
            start = base + number * 50 * MS
            made = []
            for name, parent, kind, offset_ms, _, attributes, _ in shapes[number % len(shapes)]:
                context = None if parent is None else set_span_in_context(made[parent])
                span = tracer.start_span(
                    name,
                    context=context,
                    kind=kinds[kind],
                    attributes=attributes,
                    start_time=start + int(offset_ms * MS),
                )
                made.append(span)
            shape = shapes[number % len(shapes)]
            ends = sorted(range(len(shape)), key=lambda i: (shape[i][3] + shape[i][4], -i))
            for position in ends:
                _, _, _, offset_ms, duration_ms, _, chunks = shape[position]
                span = made[position]
                for chunk in range(chunks):
                    at = offset_ms + duration_ms * (0.3 + 0.15 * chunk)
                    span.add_event("gen_ai.content.completion.chunk", timestamp=start + int(at * MS))
                span.end(end_time=start + int((offset_ms + duration_ms) * MS))

    def flush() -> None:
        provider.force_flush(timeout_millis=600_000)
        if meter_provider is not None:
            meter_provider.force_flush(timeout_millis=60_000)

    make(WARM_UP_TRACES, 0)
    flush()
    warm_exported = exporter.exported
    traces = spans // SPANS_PER_TRACE
    collections = _CollectionTimes()
    threads_started = _thread_cpu_s()
    process_started = time.process_time()
    thread_started = time.thread_time()
    gc.callbacks.append(collections.callback)
    make(traces, WARM_UP_TRACES)
    app_thread = time.thread_time() - thread_started
    flush()
    process = time.process_time() - process_started
    gc.callbacks.remove(collections.callback)
    threads = {name: cpu - threads_started.get(name, 0.0) for name, cpu in _thread_cpu_s().items()}
    result = {
        "variant": variant,
        "spans": traces * SPANS_PER_TRACE,
        "exported": exporter.exported - warm_exported,
        "failed": exporter.failed,
        "app_thread_s": app_thread,
        "process_s": process,
        "worker_s": threads.get(WORKER_THREAD),
        "exporter_s": threads.get(EXPORTER_THREAD),
        "profiled_traces": None if profiler is None else profiler._profiled_traces,
        # CPU seconds in the garbage collector, by the thread whose allocation set it off.
        "gc_s": collections.seconds,
    }
    provider.shutdown()
    if meter_provider is not None:
        meter_provider.shutdown()
    return result


WORKER_THREAD = "otel-agent-profiler"
EXPORTER_THREAD = "batch processor"
APP_THREAD = "application"


class _CollectionTimes:
    """The garbage collector's CPU time by thread, from ``gc.callbacks``.

    A collection runs on whichever thread's allocation crosses the threshold, so the profiler's
    allocations can make the application's thread pay for collections, or take them off it.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started: dict[int, float] = {}

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        thread = threading.current_thread()
        if phase == "start":
            self._started[thread.ident or 0] = time.thread_time()
            return
        started = self._started.pop(thread.ident or 0, None)
        if started is None:
            return
        name = APP_THREAD if thread is threading.main_thread() else thread.name
        name = EXPORTER_THREAD if name.startswith("OtelBatchSpan") else name
        self.seconds[name] = self.seconds.get(name, 0.0) + time.thread_time() - started


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds of the profiler's worker and the batch processor's thread, from Linux's
    ``/proc/self/task/<id>/stat`` (user and system time); empty where there is none."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        # The SDK names its thread OtelBatchSpanProcessor or OtelBatchSpanRecordProcessor by version.
        name = EXPORTER_THREAD if thread.name.startswith("OtelBatchSpan") else thread.name
        if name not in (WORKER_THREAD, EXPORTER_THREAD):
            continue
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return found


# -- the comparison -----------------------------------------------------------------------------


def _child(variant: str, endpoint: str, spans: int, tree: Path, pause_ms: float) -> dict[str, Any]:
    """One run in a fresh process, with the package found in ``tree``."""
    path = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(
        [
            sys.executable,
            __file__,
            *("--child", variant, "--endpoint", endpoint, "--spans", str(spans), "--pause-ms", str(pause_ms)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OTEL_SDK_DISABLED": "false", "PYTHONPATH": path},
    )
    if completed.returncode != 0:
        raise SystemExit(f"{variant} run failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    if result["exported"] != result["spans"] or result["failed"]:
        raise SystemExit(
            f"{variant}: {result['exported']} of {result['spans']} spans exported, {result['failed']} failed"
        )
    return result


def _collector() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_overhead import Collector

    return Collector()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=24_000, help="spans per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each variant (default: %(default)s)")
    parser.add_argument(
        "--variants",
        choices=("default", "all"),
        default="default",
        help="bare and profiled (default), or also profiled with metrics off, enriched spans off, and both off (all)",
    )
    parser.add_argument(
        "--before",
        metavar="DIR",
        type=Path,
        help="also run the profiled variants with the otel_agent_profiler package in DIR (another checkout)",
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=PAUSE_MS,
        help="how long the application waits after each trace, as an agent waits on its calls (default: %(default)s)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write every run's figures to FILE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_run(args.child, args.endpoint, args.spans, args.pause_ms / 1000)))
        return 0
    if args.pause_ms < 0:
        parser.error(f"--pause-ms must not be negative, got {args.pause_ms:g}")
    if args.before is not None and not (args.before / "otel_agent_profiler").is_dir():
        parser.error(f"--before: no otel_agent_profiler package in {args.before}")
    here = Path(__file__).resolve().parent.parent
    profiled = [PROFILED] + ([NO_METRICS, NO_ENRICH, ANALYSIS_ONLY] if args.variants == "all" else [])
    # (label, variant, where the package comes from)
    plan = [(BARE, BARE, here)] + [(variant, variant, here) for variant in profiled]
    if args.before is not None:
        plan += [(variant + BEFORE, variant, args.before) for variant in profiled]
    variants = [label for label, _, _ in plan]
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in variants}
    with _collector() as endpoint:
        for number in range(args.repeat):
            for label, variant, tree in plan:
                runs[label].append(_child(variant, endpoint, args.spans, tree, args.pause_ms))
            print(f"round {number + 1} of {args.repeat} done", file=sys.stderr)
    spans = runs[BARE][0]["spans"]
    per = 1e6 / spans
    print(
        f"\n{spans:,} spans per run ({spans // SPANS_PER_TRACE:,} agent traces of {SPANS_PER_TRACE} spans), "
        f"exported over OTLP/gRPC to rotel, the application pausing {args.pause_ms:g} ms after each trace; "
        f"{args.repeat} runs of each, alternating; min / median"
    )
    base = {key: _min_median(runs[BARE], key) for key in ("process_s", "app_thread_s")}
    for variant in variants:
        process = _min_median(runs[variant], "process_s")
        app = _min_median(runs[variant], "app_thread_s")
        label = LABELS[variant.removesuffix(BEFORE)] + (BEFORE if variant.endswith(BEFORE) else "")
        print(f"  {label}:")
        line = f"    process CPU        {process[0] * per:6.1f} / {process[1] * per:6.1f} us/span"
        if variant != BARE:
            line += _ratios(process, base["process_s"], GOAL_PROCESS_EXTRA)
        print(line)
        line = f"    application thread {app[0] * per:6.1f} / {app[1] * per:6.1f} us/span"
        if variant != BARE:
            line += _ratios(app, base["app_thread_s"], GOAL_APP_THREAD_EXTRA)
        print(line)
        for key, what in (("worker_s", "profiler's worker "), ("exporter_s", "exporting thread  ")):
            values = [run[key] for run in runs[variant] if run.get(key) is not None]
            if len(values) == len(runs[variant]):
                line = f"    {what} {min(values) * per:6.1f} / {statistics.median(values) * per:6.1f} us/span"
                bare = [run.get(key) for run in runs[BARE]]
                if key == "exporter_s" and variant != BARE and None not in bare:
                    line += f" ({min(values) / min(bare) - 1:+.2f}x / "
                    line += f"{statistics.median(values) / statistics.median(bare) - 1:+.2f}x over bare)"
                print(line)
        # Medians: of each run's total (every thread, gRPC's included), and of each named thread's share.
        collected = statistics.median(sum(run["gc_s"].values()) for run in runs[variant]) * per
        by_thread = ", ".join(
            f"{statistics.median(run['gc_s'].get(thread, 0.0) for run in runs[variant]) * per:.1f} on the {name}"
            for thread, name in GC_THREAD_NAMES.items()
        )
        print(f"    garbage collection {collected:6.1f} us/span at the median: {by_thread}")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    return 0


GC_THREAD_NAMES = {APP_THREAD: "application's thread", WORKER_THREAD: "worker", EXPORTER_THREAD: "exporting thread"}


def _min_median(runs: list[dict[str, Any]], key: str) -> tuple[float, float]:
    values = [run[key] for run in runs]
    return min(values), statistics.median(values)


def _ratios(value: tuple[float, float], base: tuple[float, float], goal: float) -> str:
    return f" -> {value[0] / base[0] - 1:+.2f}x / {value[1] / base[1] - 1:+.2f}x extra (goal <= +{goal:.2f}x)"


if __name__ == "__main__":
    sys.exit(main())
