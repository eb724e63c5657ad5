"""``serve`` and its upstream killed for real and started again, under load; what is lost is counted.

Companions of test_faults_serve.py (same ``Sender``, ``Upstream`` and ``sent / delivered / lost`` report), with
processes instead of threads so that a kill is a real SIGKILL:

* the upstream (``otlp_sink.py``, a process recording every span id it acknowledges) is killed mid-stream and
  started again on the same ports: ``serve`` holds what it accepted, within its pending cap, pushes back at the
  cap, and delivers everything once the upstream is back;
* ``serve`` itself is killed with SIGKILL behind a real collector (rotel) that retries its exports, and started
  again on the same ports: what ``serve`` held at the kill is lost, and only that; everything the collector
  accepted from then on is delivered by its retries.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.test_faults_serve import Sender, Upstream, _report, _request
from tests.support.backends import HOST, Rotel, artifact_dir, free_ports, http_get, port_open, wait_until
from tests.support.otlp_sink import recorded_span_ids
from tests.support.paths import SUPPORT

pytestmark = [pytest.mark.faults, pytest.mark.e2e]

SINK = SUPPORT / "otlp_sink.py"
STOP_LINE = re.compile(r"received ([\d,]+) spans? .*?; forwarded ([\d,]+), ([\d,]+) not delivered")


class Process:
    """A subprocess (own process group) writing to ``log``; killed or stopped by this test only."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, ready: Any) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(ready, 30, f"{self.argv[1]} to listen", alive=self._alive, details=self.text)

    def _alive(self) -> None:
        assert self.popen is not None and self.popen.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.popen is not None
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM, and the exit code."""
        assert self.popen is not None
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
        return self.popen.wait(timeout)

    def cleanup(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)


class Sink(Process):
    """otlp_sink.py on fixed ports; the span ids it acknowledged are read from its record file."""

    def __init__(self, directory: Path) -> None:
        self.grpc_port, self.http_port = free_ports(2)
        self.record = directory / "sink-received.txt"
        argv = [sys.executable, str(SINK), "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port)]
        super().__init__([*argv, "--record", str(self.record)], directory / "sink.log")

    def url(self, protocol: str) -> str:
        return f"http://{HOST}:{self.grpc_port if protocol == 'grpc' else self.http_port}"

    def begin(self) -> Sink:
        self.start(lambda: port_open(self.grpc_port) and port_open(self.http_port))
        return self

    def count(self, ids: set[bytes]) -> int:
        return len(ids & recorded_span_ids(self.record))


class Serve(Process):
    """``otel-agent-profiler serve`` on fixed ports (kept across restarts)."""

    def __init__(self, directory: Path, *options: str) -> None:
        self.http_port, self.grpc_port = free_ports(2)
        argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(self.http_port)]
        argv += ["--grpc-port", str(self.grpc_port), "--metrics-interval", "3600", *options]
        super().__init__(argv, directory / "serve.log")

    def begin(self) -> Serve:
        self.start(lambda: port_open(self.http_port) and port_open(self.grpc_port))
        return self

    def health(self) -> dict[str, Any]:
        import json

        status, body = http_get(f"http://{HOST}:{self.http_port}/health")
        assert status == 200, body
        return json.loads(body)  # type: ignore[no-any-return]

    def stop_line(self) -> tuple[int, int, int]:
        """(received, forwarded, not delivered) from the last stop line of the log."""
        matches = STOP_LINE.findall(self.text())
        assert matches, self.text()
        received, forwarded, failed = (int(count.replace(",", "")) for count in matches[-1])
        return received, forwarded, failed


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.cleanup()


class Load:
    """Sender threads that keep sending fresh spans (retrying 503s) until stopped; can pause between requests."""

    def __init__(self, sender: Sender, threads: int, spans: int, traces: int) -> None:
        self.sender = sender
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._busy = threading.Semaphore(threads)
        self._threads = [threading.Thread(target=self._run, args=(spans, traces)) for _ in range(threads)]
        self._count = threads
        for thread in self._threads:
            thread.start()

    def _run(self, spans: int, traces: int) -> None:
        while not self._stop.is_set():
            if not self._running.wait(0.05):
                continue
            with self._busy:
                if self._running.is_set():  # not paused while this thread waited for its turn
                    self.sender.send(_request(spans, traces=traces), retry_for_s=30)
            time.sleep(0.005)

    def pause(self) -> None:
        """Returns once no request is in flight."""
        self._running.clear()
        for _ in range(self._count):
            self._busy.acquire()
        for _ in range(self._count):
            self._busy.release()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        for thread in self._threads:
            thread.join(60)


# -- the upstream killed -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_upstream_killed_mid_stream_and_restarted_loses_nothing_within_the_pending_cap(
    tmp_path: Path, processes: list[Process], protocol: str
) -> None:
    cap, per_request = 2000, 20
    sink = Sink(tmp_path)
    processes.append(sink)
    sink.begin()
    serve = Serve(tmp_path, "--upstream", sink.url(protocol), "--upstream-protocol", protocol)
    serve.argv += ["--quiet-period", "0.2", "--max-pending-spans", str(cap), "--shutdown-grace", "20"]
    processes.append(serve)
    serve.begin()
    load = Load(Sender(serve.http_port), threads=2, spans=per_request, traces=4)
    try:
        time.sleep(1.0)
        sent_before_kill = len(load.sender.accepted)
        sink.kill()  # mid-stream: exports may be in flight
        highest, states = 0, set()
        outage_ends = time.monotonic() + 3.0
        while time.monotonic() < outage_ends:
            health = serve.health()
            states.add(health["status"])
            highest = max(highest, health["counts"]["held_spans"] + health["counts"]["pending_spans"])
            time.sleep(0.05)
        sink.begin()  # the same ports, the same record file
        time.sleep(1.0)
    finally:
        load.stop()
    accepted = load.sender.accepted
    wait_until(lambda: sink.count(accepted) == len(accepted), 60, "delivery after the upstream came back")
    code = serve.terminate()
    received, forwarded, failed = serve.stop_line()
    _report(f"upstream ({protocol}) killed for 3 s", len(accepted), sink.count(accepted), failed)
    assert sent_before_kill > 0 and len(accepted) > sent_before_kill
    assert "degraded" in states, states
    assert load.sender.rejected > 0, "the cap was never reached: no pushback while the upstream was down"
    assert highest <= cap + per_request, highest
    assert (code, failed) == (0, 0), serve.text()
    assert received == forwarded == len(accepted)
    assert "Traceback" not in serve.text()


# -- serve killed ------------------------------------------------------------------------------------------------


def test_serve_killed_behind_a_retrying_collector_loses_only_what_it_held(
    tmp_path: Path, processes: list[Process]
) -> None:
    upstream = Upstream().start()
    try:
        quiet_period_s = 2.0  # traces assemble this long in serve's memory: what a SIGKILL takes with it
        serve = Serve(tmp_path, "--upstream", upstream.url, "--upstream-protocol", "http")
        serve.argv += ["--quiet-period", str(quiet_period_s), "--shutdown-grace", "20"]
        processes.append(serve)
        serve.begin()
        rotel = Rotel(
            artifact_dir("faults", "serve-killed"),
            exporter_endpoint=f"http://{HOST}:{serve.grpc_port}",
            protocol="grpc",
            extra_args=["--otlp-exporter-retry-initial-backoff", "100ms", "--otlp-exporter-retry-max-backoff", "1s"],
        ).start()
        try:
            load = Load(Sender(rotel.http_port), threads=1, spans=20, traces=4)
            try:
                time.sleep(1.5)
                # A pause of the senders long enough for rotel to pass on what it accepted makes the count
                # exact: what serve holds at the kill is what the kill can lose.
                load.pause()
                accepted_before_kill = set(load.sender.accepted)
                wait_until(
                    lambda: serve.health()["counts"]["received"] >= len(accepted_before_kill), 10, "rotel to pass on"
                )
                counts = serve.health()["counts"]
                held_at_kill = counts["held_spans"] + counts["pending_spans"]
                serve.kill()
                load.resume()  # rotel accepts and retries while serve is down
                time.sleep(2.0)
                serve.begin()  # the same ports
                time.sleep(1.5)
            finally:
                load.stop()
            accepted = load.sender.accepted
            after_kill = accepted - accepted_before_kill
            wait_until(lambda: upstream.count(after_kill) == len(after_kill), 60, "rotel's retries to be delivered")
            code = serve.terminate()
        finally:
            rotel.stop()
        delivered = upstream.count(accepted)
    finally:
        upstream.stop()
    lost = accepted - upstream.delivered
    _report("serve killed (SIGKILL) behind rotel", len(accepted), delivered, len(lost))
    print(f"[serve killed (SIGKILL) behind rotel] held by serve at the kill: {held_at_kill}")
    assert after_kill, "nothing was sent while serve was down"
    assert lost <= accepted_before_kill  # everything sent from the kill on arrived, through rotel's retries
    assert 0 < len(lost) <= held_at_kill, (len(lost), held_at_kill)
    received, forwarded, failed = serve.stop_line()  # the restarted serve: all it received, it delivered
    assert (code, failed) == (0, 0) and received == forwarded
