"""Faults in forked processes: a child's spans under a parent opened before the fork are not lost.

A ``multiprocessing`` worker forked while a span is open runs under a parent that lives in the
parent process. Before, the child's traces waited for that parent, which never ends there, and the
worker's ``os._exit`` took them all. Real SDK parts and real forks; the child's exporter writes one
JSON line per span to a file the test reads back, so what each process exported is seen.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import Tracer

from otel_agent_profiler import install

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

WORKERS = 3


def _line(span: ReadableSpan) -> str:
    attributes = {k: v for k, v in (span.attributes or {}).items() if isinstance(v, bool | int | float | str)}
    return json.dumps({"name": span.name, "pid": os.getpid(), "attributes": attributes}) + "\n"


@pytest.fixture
def out_file(tmp_path: Path) -> Iterator[tuple[Path, IO[str]]]:
    path = tmp_path / "spans.jsonl"
    with path.open("a", encoding="utf-8") as file:
        yield path, file


def exported(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def make_provider(file: IO[str], processor: str) -> TracerProvider:
    exporter = ConsoleSpanExporter(out=file, formatter=_line)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter) if processor == "batch" else SimpleSpanProcessor(exporter))
    install(provider, metrics_enabled=False)
    return provider


def agent_step(tracer: Tracer, index: int) -> None:
    with (
        tracer.start_as_current_span(f"worker {index}", attributes={"gen_ai.operation.name": "invoke_agent"}),
        tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}),
    ):
        pass


@pytest.mark.parametrize("processor", ["batch", "simple"])
def test_multiprocessing_workers_forked_inside_a_span_export_their_traces_profiled(
    out_file: tuple[Path, IO[str]], processor: str
) -> None:
    path, file = out_file
    provider = make_provider(file, processor)
    tracer = provider.get_tracer("t")
    forked = multiprocessing.get_context("fork")
    with tracer.start_as_current_span("parent run"):
        workers = [forked.Process(target=agent_step, args=(tracer, index)) for index in range(WORKERS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
    provider.shutdown()
    assert [worker.exitcode for worker in workers] == [0] * WORKERS
    spans = exported(path)
    children = [span for span in spans if span["pid"] != os.getpid()]
    print(f"\nforked workers ({processor}): sent {2 * WORKERS} / delivered {len(children)} / lost 0")
    # Without the profiler, a batch processor in a worker that ends with os._exit exports none of
    # these (its schedule had not come); the profiler's flush at the worker's exit sends them all.
    assert len(children) == 2 * WORKERS
    assert all("agent_profiler.self_time_ms" in span["attributes"] for span in children)
    roots = [span for span in children if span["name"].startswith("worker ")]
    assert [span["attributes"]["agent_profiler.trace.complete"] for span in roots] == [True] * WORKERS
    # The parent's own trace is exported once, by the parent: no child exports it again.
    assert [span["pid"] for span in spans if span["name"] == "parent run"] == [os.getpid()]


def test_a_bare_fork_child_completes_its_traces_and_a_flush_exports_them_profiled(
    out_file: tuple[Path, IO[str]],
) -> None:
    path, file = out_file
    provider = make_provider(file, "simple")
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent run"):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                agent_step(tracer, 0)
                code = 0 if provider.force_flush(10_000) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    provider.shutdown()
    assert os.waitstatus_to_exitcode(status) == 0
    children = [span for span in exported(path) if span["pid"] == pid]
    assert sorted(span["name"] for span in children) == ["chat gpt-4o", "worker 0"]
    # Profiled whole, not sent early (agent_profiler.exported_early) as spans of a trace still running.
    for span in children:
        assert "agent_profiler.exported_early" not in span["attributes"]
        assert "agent_profiler.self_time_ms" in span["attributes"]
    (root,) = [span for span in children if span["name"] == "worker 0"]
    assert root["attributes"]["agent_profiler.trace.complete"] is True
