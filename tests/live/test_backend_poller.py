"""live/backend_poller.py: polling inference servers' /metrics over HTTP into a LoadHistory.

Against the bundled server in its vLLM-like mode, for real: concurrent requests queue behind its
one-at-a-time batch, and the LLM calls of a profile carry the waiting requests the poller saw. A
dead URL, a page that is not metrics and a server that never answers cost counted failures and one
warning, never an exception or a blocked caller.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.request

import pytest

from demo.fake_llm import FakeOpenAIServer
from demo.vllm_like import VllmLike
from otel_agent_profiler.core.backend_load import attach_backend_load
from otel_agent_profiler.live.backend_poller import BackendPoller, check_metrics_url
from tests.support.span_builders import CLIENT, by_name, profile, span

LLM = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.system": "openai"}


def _chat(base_url: str, content: str) -> tuple[int, int]:
    """One chat request; its start and end, Unix epoch ns."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"{content} [[answer_tokens: 30]]"}]}
    request = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    start = time.time_ns()
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    return start, time.time_ns()


def test_llm_calls_that_queued_carry_the_waiting_requests_the_poller_saw() -> None:
    vllm = VllmLike(max_running=1)
    with FakeOpenAIServer(time_scale=0.5, vllm_like=vllm) as server:
        poller = BackendPoller([f"http://127.0.0.1:{server.port}/metrics"], interval_s=0.05).start()
        try:
            _chat(server.base_url, "warm up")  # the server's series appear with its first request
            times: list[tuple[int, int]] = [(0, 0)] * 4
            threads = [
                threading.Thread(target=lambda i=i: times.__setitem__(i, _chat(server.base_url, f"q{i}")))
                for i in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            time.sleep(0.2)  # a sample after the last call ends
        finally:
            poller.stop()
    assert not poller.running
    assert poller.scrapes_ok > 10 and poller.scrapes_failed == 0
    start = min(t[0] for t in times) - 1_000_000
    records = [span("agent", None, start, max(t[1] for t in times) + 1_000_000)]
    records += [span(f"call{i}", "agent", s, e, CLIENT, attributes=LLM) for i, (s, e) in enumerate(times)]
    trace = profile(records)
    assert attach_backend_load(trace, poller.history) == 4
    loads = [by_name(trace)[f"call{i}"].backend_load for i in range(4)]
    assert all(load is not None and load.running_max == 1 for load in loads)
    # Four requests at once on a server that runs one: the calls met up to three waiting.
    assert max(load.waiting_max or 0 for load in loads if load is not None) >= 2
    assert all(load is not None and load.kv_cache_usage_max is not None for load in loads)
    assert trace.backend_samples and {s.source for s in trace.backend_samples} == set(poller.urls)


def test_a_dead_url_is_counted_and_logged_once_and_never_raises(
    never_raise: None, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    poller = BackendPoller([f"http://127.0.0.1:{port}/metrics"], interval_s=0.02)
    with caplog.at_level(logging.WARNING, logger="otel_agent_profiler.live.backend_poller"):
        poller.start()
        deadline = time.monotonic() + 5
        while poller.scrapes_failed < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        poller.stop()
    assert time.monotonic() - started < 1.0
    assert poller.scrapes_failed >= 5 and poller.scrapes_ok == 0
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"cannot read backend metrics from http://127.0.0.1:{port}/metrics" in warning
    assert poller.history.sources() == []


def test_a_page_that_is_not_metrics_and_a_server_that_never_answers(
    never_raise: None, caplog: pytest.LogCaptureFixture
) -> None:
    silent = socket.socket()  # accepts connections (the backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with FakeOpenAIServer(time_scale=0) as server, caplog.at_level(logging.WARNING):
            urls = [f"http://127.0.0.1:{server.port}/v1/models", f"http://127.0.0.1:{silent.getsockname()[1]}/m"]
            poller = BackendPoller(urls, timeout_s=0.2)
            started = time.monotonic()
            assert poller.poll_once() == 0
            assert time.monotonic() - started < 2.0
    finally:
        silent.close()
    assert poller.scrapes_failed == 2
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "not Prometheus text exposition" in messages or "no vLLM or SGLang load metrics" in messages
    assert "timed out" in messages


@pytest.mark.parametrize("url", ["vllm:8000", "ftp://vllm/metrics", "http:///metrics", "http://vllm:99999/metrics"])
def test_a_bad_url_is_refused_with_a_reason(url: str) -> None:
    with pytest.raises(ValueError, match=r"URL|port"):
        check_metrics_url(url)
    with pytest.raises(ValueError):
        BackendPoller([url])
