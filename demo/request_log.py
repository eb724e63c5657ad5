"""The fake LLM server's request log: what was asked and how it went, never the bodies.

``_RequestLog`` is mixed into ``FakeOpenAIServer``: ``_new_entry`` opens one entry per request (the fields
``FakeOpenAIServer`` documents), the handler fills it in with ``_update``, and ``requests`` and
``request_count`` give tests a consistent snapshot. Entries are read and written under the server's lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class _RequestLog:
    """The request log of ``FakeOpenAIServer``, kept under its ``_lock``."""

    _lock: threading.Lock
    _log: list[dict[str, Any]]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of the request log, oldest first."""
        with self._lock:
            return [dict(entry) for entry in self._log]

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._log)

    def _new_entry(self, method: str, path: str, traceparent: str | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": None,
            "model": None,
            "stream": False,
            "started": time.monotonic(),
            "first_token": None,
            "finished": None,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
            "usage_sent": False,
            "finish_reason": None,
            "tool_calls": [],
            "inputs": 0,
            "traceparent": traceparent,
            "error": None,
            "aborted": False,
            "response_id": None,
        }
        with self._lock:
            self._log.append(entry)
        return entry

    def _update(self, entry: dict[str, Any], **values: Any) -> None:
        with self._lock:
            entry.update(values)
