"""Polling inference servers' ``/metrics`` into a ``LoadHistory``, for the plugin and ``serve``.

One daemon thread scrapes every URL once per interval (one second by default) with a short
timeout and keeps what it parsed in a bounded ``LoadHistory``; profiling then reads the load
during each LLM call from it (``core.backend_load.attach_backend_load``). Nothing here raises
into the application or blocks it: a URL that fails (refused, timed out, not Prometheus text)
is logged once, then at most once a minute, and polled again the next time round. After a
fork the child polls with a thread of its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.request
import weakref
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ..adapters.prometheus_metrics import load_sample_from_text
from .load_history import LoadHistory

_logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 0.5
#: A failing URL is logged when it starts failing, then at most this often.
FAILURE_LOG_INTERVAL_S = 60.0
#: A larger page is not a metrics endpoint the profiler can use (vLLM's is tens of kB).
MAX_BODY_BYTES = 8 * 1024 * 1024


def check_metrics_url(url: str) -> str:
    """``url`` stripped, if it is an http(s) URL with a host; else ``ValueError`` saying why."""
    stripped = url.strip()
    parts = urlsplit(stripped)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL of a metrics endpoint: {url!r} (e.g. http://vllm:8000/metrics)")
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    return stripped


class BackendPoller:
    """Scrapes inference servers' Prometheus endpoints into ``history`` from a daemon thread.

    Args:
        urls: The servers' metrics endpoints, e.g. ``http://vllm:8000/metrics``.
        history: Where the samples go; a new bounded one by default.
        interval_s: Seconds between rounds of scrapes.
        timeout_s: Seconds one scrape may take (connecting and reading).

    Raises:
        ValueError: a URL that is not an http(s) URL, or a non-positive interval or timeout.
    """

    def __init__(
        self,
        urls: Sequence[str],
        history: LoadHistory | None = None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not interval_s > 0 or not timeout_s > 0:
            raise ValueError("interval_s and timeout_s must be above 0")
        self.urls = tuple(dict.fromkeys(check_metrics_url(url) for url in urls))
        self.history = history if history is not None else LoadHistory()
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        #: Scrapes that gave a sample, and those that did not (unreachable, an HTTP error, not metrics).
        self.scrapes_ok = 0
        self.scrapes_failed = 0
        # Per URL: when a failure was last logged (monotonic); a URL that flaps is not logged more often.
        self._logged_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Scrapes bypass any proxy set for the application: the servers are the operator's own.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_restart_after_fork(weakref.ref(self)))

    def start(self) -> BackendPoller:
        """Start polling (once; later calls do nothing)."""
        with self._lock:
            if self._thread is None and not self._stop.is_set() and self.urls:
                self._thread = threading.Thread(target=self._run, name="otel-agent-profiler-backend", daemon=True)
                self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop polling; waits up to ``timeout_s`` for a scrape in flight. Idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def poll_once(self) -> int:
        """Scrape every URL once; returns how many gave a sample. Never raises."""
        ok = 0
        for url in self.urls:
            if self._stop.is_set():
                break
            try:
                ok += self._scrape(url)
            except Exception as exc:
                # Anything else a scrape raises (an odd opener or response, a bug of ours): counted
                # and logged as that URL's failed scrape, polled again; never into the application.
                self._failed(url, f"{type(exc).__name__}: {exc}")
        return ok

    def _scrape(self, url: str) -> bool:
        sent_ns = time.time_ns()
        try:
            with self._opener.open(url, timeout=self.timeout_s) as response:
                body = response.read(MAX_BODY_BYTES + 1)
        except OSError as exc:  # refused, timed out, an HTTP error status (HTTPError is an OSError)
            self._failed(url, str(getattr(exc, "reason", None) or exc))
            return False
        if len(body) > MAX_BODY_BYTES:
            self._failed(url, f"the response is over {MAX_BODY_BYTES} bytes")
            return False
        # The server read its gauges between sending and answering: the midpoint is the best guess.
        taken_ns = (sent_ns + time.time_ns()) // 2
        try:
            sample = load_sample_from_text(body.decode("utf-8", errors="replace"), url, taken_ns)
        except ValueError as exc:
            self._failed(url, str(exc))
            return False
        self.history.add(sample)
        self.scrapes_ok += 1
        return True

    def _failed(self, url: str, reason: str) -> None:
        self.scrapes_failed += 1
        now = time.monotonic()
        logged = self._logged_at.get(url)
        if logged is None or now - logged >= FAILURE_LOG_INTERVAL_S:
            self._logged_at[url] = now
            _logger.warning(
                "otel-agent-profiler: cannot read backend metrics from %s: %s; LLM calls get no server "
                "load until it answers (polled every %g s, logged at most once a minute)",
                url,
                reason,
                self.interval_s,
            )


def _restart_after_fork(ref: weakref.ref[BackendPoller]) -> Callable[[], None]:
    def restart() -> None:
        # The child has no polling thread; it polls on its own if the parent did.
        poller = ref()
        if poller is not None and poller._thread is not None and not poller._stop.is_set():
            poller._thread = None
            poller._lock = threading.Lock()
            poller.start()

    return restart
