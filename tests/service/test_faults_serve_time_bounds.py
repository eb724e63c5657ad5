"""``serve`` under stop signals, pipelined requests cut short by a half-close, and traces that never go quiet.

Companions of test_faults_serve.py (same ``Sender``, ``Upstream`` and ``sent / delivered / lost`` report):

* SIGHUP drains like SIGTERM (a real process, signalled for real), and the exit code says when the upstream
  rejected spans in a partial success;
* HTTP/1.1 requests pipelined before the client half-closes are each answered and taken, and a
  half-close that comes just after the answer closes the connection at once;
* a trace that keeps receiving spans is profiled and forwarded at ``--max-trace-age``, so what a kill of
  ``serve`` can lose is bounded by that age, not by how long the trace runs.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_agent_profiler.service import http_receiver
from otel_agent_profiler.service.app import ProfilingService
from tests.service.test_faults_serve import Sender, Upstream, _config, _counts, _report, _request, _span_ids
from tests.service.test_faults_serve_forwarding import ScriptedUpstream, _assert_identity, _reject_all
from tests.support.backends import free_ports, port_open, wait_until
from tests.support.serve_stop_line import STOP_LINE, stop_counts

pytestmark = pytest.mark.faults


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream().start()
    yield server
    server.stop()


#: serve's stop line: received, forwarded, not delivered and (when any) rejected by the upstream.
def _serve(upstream_url: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    http_port, grpc_port = free_ports(2)
    argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(http_port)]
    argv += ["--grpc-port", str(grpc_port), "--upstream", upstream_url, "--upstream-protocol", "http"]
    argv += ["--quiet-period", "0.2", "--shutdown-grace", "10", "--metrics-interval", "3600"]
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: port_open(http_port), 20, "serve to listen", alive=lambda: process.poll() is None)
    return process, http_port


def _hang_up(process: subprocess.Popen[bytes]) -> int:
    try:
        process.send_signal(signal.SIGHUP)
        return process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_sighup_drains_what_serve_holds_like_sigterm(upstream: Upstream, tmp_path: Path) -> None:
    upstream.delay_s = 0.2  # the spans are still held when the signal comes
    process, port = _serve(upstream.url, tmp_path / "serve.log")
    sender = Sender(port)
    for _ in range(5):
        assert sender.send(_request(20, traces=2)) == 200
    code = _hang_up(process)
    text = (tmp_path / "serve.log").read_text()
    match = STOP_LINE.search(text)
    assert match, text
    received, forwarded, failed = stop_counts(match)[:3]
    assert (received, forwarded, failed, code) == (100, 100, 0, 0), text
    assert upstream.count(sender.accepted) == 100
    _report("SIGHUP with 100 spans held", 100, upstream.count(sender.accepted), failed)


def test_spans_the_upstream_rejects_make_the_exit_code_1(tmp_path: Path) -> None:
    rejecting = ScriptedUpstream(_reject_all).start()
    try:
        process, port = _serve(rejecting.url, tmp_path / "serve.log")
        assert Sender(port).send(_request(100, traces=4)) == 200
        time.sleep(0.5)  # profiled and answered by the upstream
        code = _hang_up(process)
    finally:
        rejecting.stop()
    text = (tmp_path / "serve.log").read_text()
    match = STOP_LINE.search(text)
    assert match, text
    assert stop_counts(match) == (100, 0, 0, 100) and code == 1, text
    assert "partial success" in text
    _report("partial success at shutdown", 100, 0, 100)


def _pipelined(port: int, requests: list[bytes]) -> bytes:
    """Send ``requests`` back to back on one connection, half-close it, and read every answer."""
    data = b""
    for body in requests:
        head = "POST /v1/traces HTTP/1.1\r\nHost: serve\r\nContent-Type: application/x-protobuf\r\n"
        data += f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
        answers = b""
        while chunk := connection.recv(65536):
            answers += chunk
    return answers


@pytest.mark.parametrize("spans", [3, 2000])
def test_requests_pipelined_before_a_half_close_are_each_answered_and_taken(upstream: Upstream, spans: int) -> None:
    requests = [_request(spans) for _ in range(5)]
    with ProfilingService(_config(upstream)) as service:
        answers = _pipelined(service.http_port, [request.SerializeToString() for request in requests])
        assert answers.count(b"HTTP/1.1 200") == 5, answers[:500]
        sent = {span_id for request in requests for span_id in _span_ids(request)}
        wait_until(lambda: upstream.count(sent) == 5 * spans, 15, "every pipelined request to be delivered")
        counts = _counts(service)
        assert counts["received"] == 5 * spans
        _assert_identity(counts)
    _report(f"5 pipelined requests of {spans} spans, then a half-close", 5 * spans, upstream.count(sent), 0)


def test_a_half_close_just_after_the_answer_closes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's end arrives after its request was answered, before aiohttp waits for the next one.

    The pause after each handler makes that window, which is a few microseconds wide otherwise (a
    connection in some hundreds stayed open until the read timeout, and a client waiting for the
    close timed out).
    """
    handle = http_receiver._Connection._handle_request

    async def answer_then_pause(self: http_receiver._Connection, *args: object, **kwargs: object) -> object:
        result = await handle(self, *args, **kwargs)
        await asyncio.sleep(0.3)  # the client reads the answer and half-closes meanwhile
        return result

    monkeypatch.setattr(http_receiver._Connection, "_handle_request", answer_then_pause)
    body = _request(1).SerializeToString()
    head = "POST /v1/traces HTTP/1.1\r\nHost: serve\r\nContent-Type: application/x-protobuf\r\n"
    with ProfilingService(_config(None)) as service:
        with socket.create_connection(("127.0.0.1", service.http_port), timeout=10) as connection:
            connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            answer = connection.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer
            connection.shutdown(socket.SHUT_WR)
            started = time.monotonic()
            assert connection.recv(65536) == b""
            closed_after_s = time.monotonic() - started
        assert _counts(service)["received"] == 1
    assert closed_after_s < 2.0  # the read timeout is 10 s


def test_a_trace_that_never_goes_quiet_is_forwarded_at_the_maximum_age(upstream: Upstream) -> None:
    config = _config(upstream, quiet_period_s=1.0, max_trace_age_s=1.5)
    with ProfilingService(config) as service:
        sender = Sender(service.http_port)
        first = _request(1)
        trace_id = first.resource_spans[0].scope_spans[0].spans[0].trace_id
        started = time.monotonic()
        delivered_at: dict[int, float] = {}
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                delivered_at.setdefault(upstream.count(sender.accepted), time.monotonic() - started)
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            assert sender.send(first) == 200
            for _ in range(24):  # a span every 0.25 s for 6 s: never quiet for 1 s
                time.sleep(0.25)
                request = _request(1)
                request.resource_spans[0].scope_spans[0].spans[0].trace_id = trace_id
                assert sender.send(request) == 200
            arrived_while_running = upstream.count(sender.accepted)
            counts = _counts(service)
        finally:
            stop.set()
            watcher.join()
        wait_until(lambda: upstream.count(sender.accepted) == 25, 10, "the last span")
    # The first spans left at the age limit, profiled; the later ones as they came, unprofiled (late).
    assert arrived_while_running >= 20, arrived_while_running
    assert min(at for count, at in delivered_at.items() if count > 0) < 2.5
    assert counts["traces_profiled"] == 1 and counts["late"] >= 15
    _assert_identity(counts)
    _report("one trace active for 6 s, max age 1.5 s", 25, 25, 0)
