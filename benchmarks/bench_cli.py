"""Benchmark: every offline command as users run it, against ``json.load`` of the same file.

Generates OTLP JSON exports of synthetic agent runs (see agent_traces.py) of 200,000+ spans:

* lean (about 369 bytes a span): the attributes the profile reads (operation, model, tool and
  agent names, token counts), no events and no status, and below every LLM call, web tool call,
  vector-store query and SQL tool call the client span of its request (httpx, psycopg), written
  compactly, as an export of lightly instrumented agents looks;
* compact (about 446 bytes a span): the same without the request spans, with an empty status;
* heavy: every attribute opentelemetry-instrumentation-openai records, chunk events, written as
  ``json.dumps`` writes it (the file the other benchmarks use);
* content (about 2 KB a span): heavy, with the prompt and completion text.

Then runs, each as its own subprocess and alternating, ``--repeat`` times: the baseline (a
Python process doing ``json.load`` of the file and nothing else) and each command, its output
going to a file. For each it prints the wall time, spans per second and peak resident memory
(the larger of ``wait4``'s ``ru_maxrss`` and the sampled sum of the proportional set sizes of
the process and its worker processes), each as a ratio to the baseline's in the same run, min and
median of the runs, and whether the goals are met (medians): ``analyze --format json`` <= 1.0x
``json.load``; the text report, ``export`` and ``report --summary-json`` <= 1.5x; ``report
--html`` and ``diff`` <= 2x; peak memory no higher than ``json.load``'s. ``diff`` reads the file
twice (as baseline and candidate); its baseline loads it twice too. ``analyze`` runs with the
default workers (one per core) and with ``--workers 1``. ``--before PYTHONPATH`` also runs every
command with another copy of the package (a checkout of the previous version), right after this
one each time: before and after in one run.

``--json-lines 2000000`` also writes a Collector file-exporter JSON Lines export of that many
spans (100 spans a line, about 2,000 traces open at once) and runs ``analyze --on-disk`` on it,
JSON and text, against a process reading every line with ``json.loads``; the goal is a peak
below 3 GB.

    python benchmarks/bench_cli.py [--spans 200000] [--repeat 3] [--variant lean|compact|heavy|content|both|all]
        [--only WORD...] [--before PYTHONPATH] [--json-lines SPANS]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_runs, generate_spans, otlp_document

GOAL_RATIO_JSON = 1.0  # analyze --format json
GOAL_RATIO = 1.5  # the text report, report --summary-json, export
GOAL_RATIO_SLOW = 2.0  # report --html and diff
GOAL_MEMORY_RATIO = 1.0
# The command as users run it; PYTHONPATH picks which copy of the package (the benchmark's own
# environment otherwise).
CLI = [sys.executable, "-m", "otel_agent_profiler"]
# How often the memory of a command's processes is sampled. Reading smaps_rollup walks a process's
# page tables: every 20 ms, for a command and its two workers of a gigabyte each, the sampling took
# a sizeable share of this 2-core machine from the command it measured (the text report ran 15%
# slower than unobserved). The peaks it looks for last seconds.
SAMPLE_INTERVAL_S = 0.1
# json.load of every file given, each kept (diff holds both of its inputs too).
BASELINE = "import json, sys\ndocuments = [json.load(open(path, 'rb')) for path in sys.argv[1:]]"

# What the profile reads; everything else is dropped from the lean export.
_LEAN_ATTRIBUTES = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.tool.name",
        "gen_ai.agent.name",
        "gen_ai.data_source.id",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "db.system",
    }
)


def _lean(span: dict[str, Any]) -> dict[str, Any]:
    span = {key: value for key, value in span.items() if key != "events"}
    span["attributes"] = [kv for kv in span["attributes"] if kv["key"] in _LEAN_ATTRIBUTES]
    return span


#: The client span an instrumented library (httpx, requests, psycopg) writes below a span of the
#: generator that calls a service, by that span's name (LLM calls are matched on their operation):
#: web tools, the vector store (Qdrant, over HTTP) and the SQL tool.
_POST = ("POST", {"key": "http.request.method", "value": {"stringValue": "POST"}})
_GET = ("GET", {"key": "http.request.method", "value": {"stringValue": "GET"}})
_CLIENT_SPANS = {
    "execute_tool fetch_url": _GET,
    "execute_tool get_weather": _GET,
    "execute_tool search_kb": _POST,
    "retrieval kb": _POST,
    "execute_tool run_sql": ("SELECT", {"key": "db.system", "value": {"stringValue": "postgresql"}}),
}


def _leanest(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lean export of an app whose client libraries are instrumented too: every LLM call, web
    tool call, vector-store query and SQL tool call has its request below it, a CLIENT span with its
    method (or database) and nothing else; no span has a status (none failed, and UNSET is written
    as nothing); the vector store's name is in the span's name only. About 369 bytes a span: the
    cheap spans are many, as in such exports."""
    lean = []
    for span in spans:
        span = _lean(span)
        del span["status"]
        span["attributes"] = [kv for kv in span["attributes"] if kv["key"] != "gen_ai.data_source.id"]
        lean.append(span)
        name = span["name"]
        client = _POST if name.startswith(("chat ", "embeddings ")) else _CLIENT_SPANS.get(name)
        if client is not None:
            start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
            request = {
                "traceId": span["traceId"],
                # Unique within the trace: the generator numbers its spans from 1.
                "spanId": f"{(1 << 63) | int(span['spanId'], 16):016x}",
                "parentSpanId": span["spanId"],
                "name": client[0],
                "kind": 3,
                "startTimeUnixNano": str(start + (end - start) // 100),
                "endTimeUnixNano": str(end - (end - start) // 200),
                "attributes": [client[1]],
            }
            lean.append(request)
    return lean


#: The exports, by name: what each holds.
VARIANTS = {
    "lean": "lean: the attributes the profile reads, the requests below the calls, compact",
    "compact": "the attributes the profile reads, compact",
    "heavy": "every attribute the OpenAI instrumentation records, chunk events",
    "content": "heavy, with prompt and completion content",
}


def write_export(path: Path, span_target: int, variant: str) -> int:
    """Write the ``variant`` export of ``span_target``+ spans to ``path``; the number of spans."""
    if variant == "lean":
        # The requests below the calls add about 78% more spans.
        spans = _leanest(generate_spans(span_target * 100 // 178))
        path.write_text(json.dumps(otlp_document(spans), separators=(",", ":")))
    elif variant == "compact":
        spans = [_lean(s) for s in generate_spans(span_target)]
        path.write_text(json.dumps(otlp_document(spans), separators=(",", ":")))
    else:
        spans = generate_spans(span_target, content=variant == "content")
        path.write_text(json.dumps(otlp_document(spans)))
    return len(spans)


def write_json_lines(path: Path, span_target: int) -> int:
    """Write a Collector file-exporter export of ``span_target``+ lean spans: each line a batch of spans
    of many traces (about 2,000 open at once), so no line holds a whole trace. The number of spans."""
    rng = random.Random(17)
    written = 0
    batch = 0
    with path.open("w", encoding="utf-8") as out:
        while written < span_target:
            window: list[dict[str, Any]] = []
            for _ in range(10):  # 10 x 200 traces interleaved
                start = 1_760_000_000_000_000_000 + batch * 10**13
                for run in generate_runs(200, seed=7 + batch, start_ns=start, first_trace=batch * 200):
                    window.extend(_lean(span) for span in run)
                batch += 1
            rng.shuffle(window)
            for first in range(0, len(window), _SPANS_PER_LINE):
                out.write(json.dumps(otlp_document(window[first : first + _SPANS_PER_LINE]), separators=(",", ":")))
                out.write("\n")
            written += len(window)
    return written


_SPANS_PER_LINE = 100
GOAL_JSON_LINES_MB = 3_000
# Reading every line and nothing else (the records are not kept: 2,000,000 spans of dicts would
# not fit in the memory goal).
BASELINE_LINES = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)"


def _written_by_child(*options: str) -> int:
    """Run this script with ``options`` to write an export; the number of spans it wrote.

    Written by a child: this process must stay small. Linux starts a forked child's peak RSS
    (ru_maxrss) at its parent's, so a parent holding the generated spans would floor every figure.
    """
    written = subprocess.run([sys.executable, __file__, *options], check=True, capture_output=True, text=True)
    return int(written.stdout)


def run_json_lines(span_target: int, repeat: int, work: Path) -> None:
    """``analyze`` on a JSON Lines export bigger than memory would allow in full: profiled on disk."""
    path = work / "export.jsonl"
    spans = _written_by_child("--write-json-lines", str(path), "--spans", str(span_target))
    size_mb = path.stat().st_size / 1e6
    stdout = work / "stdout"
    out = str(work / "out")
    todo = [
        ("analyze --format json (on disk)", [*CLI, "analyze", str(path), "--format", "json", "-o", out, "--on-disk"]),
        ("analyze (text report, on disk)", [*CLI, "analyze", str(path), "-o", out, "--on-disk"]),
    ]
    baseline: list[tuple[float, float]] = []
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in todo}
    for _ in range(repeat):
        baseline.append(timed([sys.executable, "-c", BASELINE_LINES, str(path)], stdout))
        for label, argv in todo:
            runs[label].append(timed(argv, stdout))
    print(f"\n{spans:,} spans, {size_mb:,.0f} MB of OTLP JSON Lines ({_SPANS_PER_LINE} spans a line, traces spread")
    print(f"over lines); min / median of {repeat} runs; goal: peak memory < {GOAL_JSON_LINES_MB:,} MB")
    b_low, b_median, b_mb = _figures(baseline)
    print(f"  {'json.loads of every line (baseline)':34} {b_low:6.2f} / {b_median:6.2f} s  peak {b_mb:,.0f} MB")
    for label, _ in todo:
        low, median, mb = _figures(runs[label])
        verdict = "goal met" if mb < GOAL_JSON_LINES_MB else "goal missed"
        print(
            f"  {label:34} {low:6.2f} / {median:6.2f} s = {low / b_low:.2f}x / {median / b_median:.2f}x"
            f"  {spans / low:>9,.0f} / {spans / median:>9,.0f} spans/s  peak {mb:,.0f} MB  {verdict}"
        )
    path.unlink()


@dataclass(frozen=True)
class Command:
    label: str
    argv: list[str]
    #: The ratio to the baseline the time must stay at or under.
    goal_ratio: float
    #: The baseline loads the file this many times (diff reads it twice).
    loads: int = 1


def commands(path: Path, work: Path) -> list[Command]:
    out = str(work / "out")
    file = str(path)
    return [
        Command("analyze --format json > FILE", [*CLI, "analyze", file, "--format", "json"], GOAL_RATIO_JSON),
        Command(
            "analyze --format json --output", [*CLI, "analyze", file, "--format", "json", "-o", out], GOAL_RATIO_JSON
        ),
        Command("analyze (text report) > FILE", [*CLI, "analyze", file, "--no-progress"], GOAL_RATIO),
        Command(
            "analyze --format json, 1 worker",
            [*CLI, "analyze", file, "--format", "json", "-o", out, "--workers", "1"],
            GOAL_RATIO_JSON,
        ),
        Command("analyze (text), 1 worker", [*CLI, "analyze", file, "--no-progress", "--workers", "1"], GOAL_RATIO),
        Command("export --format speedscope", [*CLI, "export", file, "--format", "speedscope", "-o", out], GOAL_RATIO),
        Command(
            "report --summary-json",
            [*CLI, "report", file, "--html", out + ".html", "--summary-json", out, "--no-progress"],
            GOAL_RATIO,
        ),
        Command("report --html", [*CLI, "report", file, "--html", out + ".html", "--no-progress"], GOAL_RATIO_SLOW),
        Command("diff FILE FILE", [*CLI, "diff", file, file, "--no-progress"], GOAL_RATIO_SLOW, loads=2),
    ]


def _tree_memory_mb(pid: int) -> float:
    """Memory of ``pid`` and all its descendants (worker processes), in MB: the sum of their
    proportional set sizes (PSS: a page shared by n processes counts 1/n in each, so pages a
    forked worker shares with its parent are counted once)."""
    total_kb = 0
    pending = [str(pid)]
    while pending:
        current = pending.pop()
        try:
            rollup = Path(f"/proc/{current}/smaps_rollup").read_text()
            pending += Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total_kb += int(line.split()[1])
                break
    return total_kb / 1024


def timed(argv: list[str], stdout_path: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall time of ``argv`` (standard output to ``stdout_path``) and its peak resident memory (MB).

    The memory is the larger of the process's own peak (``wait4``) and the peak of the sum of the
    proportional set sizes of the process and its worker processes, sampled every
    ``SAMPLE_INTERVAL_S``.
    """
    peak_tree = 0.0
    with stdout_path.open("wb") as stdout:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak_tree
            while not done.wait(SAMPLE_INTERVAL_S):
                peak_tree = max(peak_tree, _tree_memory_mb(process.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
    errors = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    # diff exits 3 when it finds a regression; every exit above that, or a signal, is a failure.
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed ({status}): {errors[-2000:]}")
    return elapsed, max(usage.ru_maxrss / 1024, peak_tree)


def _figures(runs: list[tuple[float, float]]) -> tuple[float, float, float]:
    seconds = [s for s, _ in runs]
    return min(seconds), statistics.median(seconds), statistics.median(mb for _, mb in runs)


def run(
    span_target: int, repeat: int, variant: str, work: Path, only: list[str], before: str | None
) -> list[dict[str, Any]]:
    """Time the commands on the ``variant`` export; with ``before`` (a PYTHONPATH), each also as that
    copy of the package runs it, right after the current one."""
    path = work / f"{variant}.json"
    spans = _written_by_child("--write-export", str(path), "--spans", str(span_target), "--variant", variant)
    size_mb = path.stat().st_size / 1e6
    stdout = work / "stdout"
    todo = [command for command in commands(path, work) if not only or any(word in command.label for word in only)]
    copies: list[tuple[str, dict[str, str] | None]] = [("", None)]
    if before is not None:
        copies.append((" [before]", {**os.environ, "PYTHONPATH": before}))
    loads = sorted({command.loads for command in todo})
    baseline_runs: dict[int, list[tuple[float, float]]] = {n: [] for n in loads}
    command_runs: dict[str, list[tuple[float, float]]] = {
        command.label + suffix: [] for command in todo for suffix, _ in copies
    }
    timed([sys.executable, "-c", BASELINE, str(path)], stdout)  # warm-up: the file into the page cache
    for _ in range(repeat):
        for n in loads:
            baseline_runs[n].append(timed([sys.executable, "-c", BASELINE, *[str(path)] * n], stdout))
        for command in todo:
            for suffix, env in copies:
                command_runs[command.label + suffix].append(timed(command.argv, stdout, env))

    per_span = path.stat().st_size / spans
    print(f"\n{spans:,} spans, {size_mb:.1f} MB of OTLP JSON ({VARIANTS[variant]}, {per_span:.0f} bytes a span)")
    print(f"min / median of {repeat} runs")
    base_min, base_median, base_mb = _figures(baseline_runs[1])
    print(
        f"  {'json.load (baseline)':34} {base_min:6.2f} / {base_median:6.2f} s"
        f"  {spans / base_min:>9,.0f} / {spans / base_median:>9,.0f} spans/s  peak {base_mb:,.0f} MB"
    )
    results = []
    for command in todo:
        for suffix, _ in copies:
            label = command.label + suffix
            low, median, mb = _figures(command_runs[label])
            b_low, b_median, b_mb = _figures(baseline_runs[command.loads])
            ratio_min, ratio_median, memory = low / b_low, median / b_median, mb / b_mb
            rate_min, rate_median = spans / low, spans / median
            missed = []
            if ratio_median > command.goal_ratio:
                missed.append(f"time > {command.goal_ratio:g}x")
            if memory > GOAL_MEMORY_RATIO:
                missed.append("memory above json.load's")
            verdict = "goals met" if not missed else "goal missed: " + ", ".join(missed)
            print(
                f"  {label:43} {low:6.2f} / {median:6.2f} s = {ratio_min:.2f}x / {ratio_median:.2f}x"
                f"  {rate_min:>9,.0f} / {rate_median:>9,.0f} spans/s  peak {mb:,.0f} MB = {memory:.2f}x  {verdict}"
            )
            results.append({"command": label, "ratio": ratio_median, "memory": memory, "met": not missed})
    path.unlink()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans per export (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (default: %(default)s)")
    parser.add_argument(
        "--variant",
        choices=(*VARIANTS, "both", "all"),
        default="both",
        help="which export (both: lean and content; all: every one)",
    )
    parser.add_argument(
        "--json-lines",
        type=int,
        default=0,
        metavar="SPANS",
        help="also analyse a Collector JSON Lines export of SPANS spans on disk (e.g. 2000000; 0: skip)",
    )
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="WORD", help="only the commands whose label holds one of the WORDs"
    )
    parser.add_argument(
        "--before",
        metavar="PYTHONPATH",
        help="also run each command with this PYTHONPATH (another copy of the package), alternating with this one",
    )
    parser.add_argument("--write-export", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--write-json-lines", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_export:
        print(write_export(Path(args.write_export), args.spans, args.variant))
        return 0
    if args.write_json_lines:
        print(write_json_lines(Path(args.write_json_lines), args.spans))
        return 0
    variants = {"both": ["lean", "content"], "all": list(VARIANTS)}.get(args.variant, [args.variant])
    print(
        f"goals: analyze --format json <= {GOAL_RATIO_JSON:g}x json.load, the text report, export and report "
        f"--summary-json <= {GOAL_RATIO:g}x, report --html and diff <= {GOAL_RATIO_SLOW:g}x (medians); "
        "peak memory <= json.load's; time ratios are min / median"
    )
    print("baseline: a Python process running json.load on the file, garbage collector on (Python's default)")
    with tempfile.TemporaryDirectory() as workdir:
        for variant in variants:
            run(args.spans, args.repeat, variant, Path(workdir), args.only, args.before)
        if args.json_lines:
            run_json_lines(args.json_lines, args.repeat, Path(workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
