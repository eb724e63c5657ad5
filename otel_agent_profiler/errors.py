"""What the profiler does with its own bugs: log once, keep the user's app running.

OpenTelemetry does not guard span processor hooks, so anything they raise would reach the
user's code. Each place that can fail logs its first error (with the traceback) and stays
quiet after that. The test suite turns ``raise_internal_errors`` on so bugs surface there.
"""

from __future__ import annotations

import logging
import threading

_logger = logging.getLogger("otel_agent_profiler")
_reported: set[str] = set()
_lock = threading.Lock()

#: Set by the test suite: re-raise instead of logging.
raise_internal_errors = False


def report_internal_error(where: str) -> None:
    """Call from an ``except`` block: logs the current exception once per ``where``."""
    if raise_internal_errors:
        raise
    with _lock:
        if where in _reported:
            return
        _reported.add(where)
    _logger.exception("otel-agent-profiler: internal error in %s; spans are still exported (logged once)", where)
