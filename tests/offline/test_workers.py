"""Per-trace work in forked worker processes: same results, same order, errors and Ctrl-C handled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.offline import workers

pytestmark = pytest.mark.skipif(not workers.can_fork(), reason="worker processes are forked")


def _forks_once_threads_ended() -> bool:
    """Whether workers are forked, once the threads of an earlier pool have ended (they take a moment).

    Threads that stay (numpy's, once an earlier test imported it) make the work run here."""
    deadline = time.monotonic() + 0.5
    while workers.worker_context().get_start_method() != "fork" and time.monotonic() < deadline:
        time.sleep(0.01)
    return workers.worker_context().get_start_method() == "fork"


@pytest.mark.parametrize("count", [0, 1, 2, 7, 33, 1000])
@pytest.mark.parametrize("worker_count", [1, 2, 3])
def test_results_come_back_in_input_order(count: int, worker_count: int) -> None:
    data = [f"item {index}" for index in range(count)]
    forks = _forks_once_threads_ended()
    results = list(workers.map_in_order(lambda index: (os.getpid(), data[index].upper()), count, worker_count))
    assert [text for _, text in results] == [f"ITEM {index}" for index in range(count)]
    processes = {pid for pid, _ in results}
    if worker_count > 1 and count > 1 and forks:
        assert os.getpid() not in processes, "the work ran in the parent"
    else:
        assert processes <= {os.getpid()}


def test_an_exception_in_the_work_reaches_the_caller() -> None:
    def work(index: int) -> int:
        if index == 40:
            raise ValueError("item 40 is bad")
        return index

    with pytest.raises(ValueError, match="item 40 is bad"):
        list(workers.map_in_order(work, 100, 2))


def test_workers_are_forked_only_while_no_other_thread_runs() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert workers.worker_context().get_start_method() == "spawn"
        # The work, a closure, cannot be sent to a spawned process: it runs here.
        assert {pid for pid in workers.map_in_order(lambda _: os.getpid(), 10, 2)} == {os.getpid()}
    finally:
        release.set()
        thread.join()


def test_workers_for_small_and_large_inputs() -> None:
    assert workers.workers_for(None, workers.MIN_SPANS_FOR_WORKERS - 1) == 1
    assert workers.workers_for(None, workers.MIN_SPANS_FOR_WORKERS) == min(
        workers.available_cores(), workers.MAX_AUTO_WORKERS
    )
    assert workers.workers_for(3, 10) == 3


@pytest.fixture(scope="module")
def sixty_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spans = [span for run in generate_runs(60, seed=11) for span in run]
    path = tmp_path_factory.mktemp("runs") / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "options",
    [[], ["--all"], ["--format", "json"], ["--format", "json", "--findings", "--what-if", "llm=2x"]],
    ids=["text", "text-all", "json", "json-findings-what-if"],
)
def test_analyze_writes_the_same_report_with_any_number_of_workers(
    sixty_traces: Path, tmp_path: Path, options: list[str]
) -> None:
    outputs = []
    for count in ("1", "2", "3"):
        out = tmp_path / f"out-{count}"
        assert main(["analyze", str(sixty_traces), "--workers", count, "-o", str(out), *options]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(outputs[0]) > 10_000


@pytest.mark.e2e
@pytest.mark.parametrize(
    "options, children",
    # The text report's two workers; the JSON's helper (``offline.split_reading``), forked once the file is scanned.
    [([], 2), (["--format", "json"], 1)],
    ids=["workers", "json-helper"],
)
def test_ctrl_c_stops_the_workers_and_exits_130(options: list[str], children: int, tmp_path: Path) -> None:
    spans = [span for run in generate_runs(1500, seed=3) for span in run]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(otlp_document(spans)), encoding="utf-8")
    command = [sys.executable, "-m", "otel_agent_profiler", "analyze", str(path), "--workers", "2", "-o", "/dev/null"]
    process = subprocess.Popen(
        [*command, *options], stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=tmp_path
    )
    # Interrupt while the workers run (the whole group, as a terminal's Ctrl-C does).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_children(process.pid)) < children and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, "finished before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in stderr
    time.sleep(0.2)
    leftover = subprocess.run(["pgrep", "-s", str(process.pid)], capture_output=True, text=True).stdout.split()
    assert leftover == []


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
