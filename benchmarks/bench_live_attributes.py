"""Benchmark: what the live profiler's span attributes cost per span, essential vs all.

On the traces of ``bench_live_realistic.py`` (12 spans each, made with the SDK and kept in memory),
one thread, no exporter: for each setting of ``span_attributes``, the profiling step (analysis and
attributes) with the enriched copies, then the OTLP protobuf encoding of those copies, which the
exporter does for every span. Both settings alternate; min and median of ``--repeat`` runs, per
span. The end-to-end figures, with a real exporter and collector, are ``bench_live_realistic.py``'s;
this one isolates the part that the number of added attributes decides, which on a loaded machine
is smaller than that benchmark's spread between runs.

    python benchmarks/bench_live_attributes.py [--traces 200] [--repeat 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("all", "essential")


def _traces(count: int) -> list[tuple[list[Any], list[Any]]]:
    """``count`` agent traces: each one's ended SDK spans and their records."""
    from bench_live_realistic import MS, trace_shape
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import set_span_in_context

    from otel_agent_profiler.adapters.sdk_spans import records_from_spans

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    base = 1_700_000_000_000_000_000
    traces = []
    for number in range(count):
        exporter.clear()
        shape = trace_shape(number)
        spans: list[Any] = []
        for name, parent, _kind, start, _duration, attributes, _chunks in shape:
            context = set_span_in_context(spans[parent]) if parent is not None else None
            spans.append(
                tracer.start_span(name, context=context, start_time=base + int(start * MS), attributes=attributes)
            )
        for (_name, _parent, _kind, start, duration, _attributes, chunks), span in zip(shape, spans, strict=True):
            for chunk in range(chunks):
                span.add_event("gen_ai.content.completion.chunk", timestamp=base + int((start + 1 + chunk) * MS))
            span.end(end_time=base + int((start + duration) * MS))
        originals = list(exporter.get_finished_spans())
        traces.append((originals, records_from_spans(originals)))
    provider.shutdown()
    return traces


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=200, help="traces per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=9, help="runs of each setting (default: %(default)s)")
    args = parser.parse_args()

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_agent_profiler.live.profiling import ProfilingStep
    from otel_agent_profiler.plugin.config import ProfilerConfig
    from otel_agent_profiler.plugin.enriched_span import EnrichedSpan

    traces = _traces(args.traces)
    spans = sum(len(originals) for originals, _ in traces)
    options = ProfilerConfig().profile_options()

    def ignore(where: str, trace_id: str) -> None:
        raise AssertionError(f"{where} failed for trace {trace_id}")

    steps = {mode: ProfilingStep(options, ignore, all_span_attributes=mode == "all") for mode in MODES}
    added = {mode: 0 for mode in MODES}
    timings: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.repeat):
        for mode in MODES:
            step = steps[mode]
            started = time.process_time()
            copies = []
            for originals, records in traces:
                result = step.profile(records, complete=True, outcome="complete")
                copies.extend(EnrichedSpan.of(o, a or {}) for o, a in zip(originals, result.attributes, strict=True))
            profiled = time.process_time()
            encode_spans(copies).SerializeToString()
            encoded = time.process_time()
            timings[mode].append(((profiled - started) / spans * 1e6, (encoded - profiled) / spans * 1e6))
            originals_in_order = [span for originals, _ in traces for span in originals]
            added[mode] = sum(
                len(copy.attributes) - len(span.attributes)
                for copy, span in zip(copies, originals_in_order, strict=True)
            )

    print(
        f"{spans:,} spans ({args.traces} agent traces of 12 spans); {args.repeat} runs of each, alternating;",
        "min / median",
    )
    for mode in MODES:
        profiling = [p for p, _ in timings[mode]]
        encoding = [e for _, e in timings[mode]]
        print(f"  span_attributes={mode}: {added[mode] / spans:.2f} attributes added per span")
        print(
            f"    profiling step, enriched copies {min(profiling):6.1f} / {statistics.median(profiling):6.1f} us/span"
        )
        print(f"    OTLP encoding of the copies     {min(encoding):6.1f} / {statistics.median(encoding):6.1f} us/span")


if __name__ == "__main__":
    main()
