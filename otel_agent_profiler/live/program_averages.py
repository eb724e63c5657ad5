"""Every profiled trace averaged per agent program, for ``serve``'s ``GET /programs``.

The sums of one program and what a trace's program is are pure (``core.programs``); this holds
the sums of every program. At most ``max_programs`` programs are kept; the traces of programs
first seen after that are counted in ``other_programs`` and not averaged. It is written by the
profiling worker and read by the HTTP receiver's helper thread: ``add`` holds the lock for the
few additions of one trace, ``to_dict`` only while it copies the sums.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.backend_load import summarize_loads
from ..core.profile import TraceProfile
from ..core.programs import DURATION_WINDOW, MAX_PROGRAMS, ProgramSums, scan_trace


class ProgramAverages:
    """Per-program running sums of trace profiles, bounded in the number of programs.

    Args:
        max_programs: Programs averaged at most; traces of programs first seen later are counted
            in ``other_programs``.
        duration_window: Durations per program that p50 and p90 are computed over (the most recent).
        clock: Unix time in seconds, read once: when the averages start (``since``).
    """

    def __init__(
        self,
        max_programs: int = MAX_PROGRAMS,
        duration_window: int = DURATION_WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_programs < 0 or duration_window < 1:
            raise ValueError("max_programs must be >= 0 and duration_window >= 1")
        self.max_programs = max_programs
        self.duration_window = duration_window
        self.since = clock()
        self._programs: dict[tuple[str, str], ProgramSums] = {}
        self._other_programs = 0
        self._lock = threading.Lock()

    def add(self, profile: TraceProfile) -> None:
        """Add one profiled trace to its program's sums (a trace without spans is ignored).

        This is the one place a trace's numbers enter the averages, the load its LLM calls met on
        their inference servers included (their ``backend_load``, ``core.backend_load``).
        """
        if not profile.roots:
            return
        service, name, error = scan_trace(profile)
        load = summarize_loads(profile.spans)
        key = (service, name)
        with self._lock:
            program = self._programs.get(key)
            if program is None:
                if len(self._programs) >= self.max_programs:
                    self._other_programs += 1
                    return
                program = self._programs[key] = ProgramSums()
            program.add_trace(profile, error, load, self.duration_window)

    @property
    def other_programs(self) -> int:
        """Traces of programs first seen after ``max_programs`` were kept: counted, not averaged."""
        return self._other_programs

    def to_dict(self, service: str | None = None) -> dict[str, Any]:
        """The averages as JSON-ready data, the programs with the most traces first.

        Args:
            service: Only the programs of this service (``service.name``), when given.

        Returns:
            ``{"programs": [...], "other_programs": K, "since": unix seconds}``; each program has
            ``service``, ``program``, ``traces``, ``error_traces``, ``priced_traces`` and
            ``traces_with_llm_phases`` (counts), and means per trace: ``duration_ms`` (``mean``,
            ``p50``, ``p90``), ``critical_path_ms``, ``categories`` (``critical_path_ms``,
            ``self_time_ms`` and ``critical_path_share`` per category), ``llm_calls``, ``tokens``,
            ``cost_usd`` (over the priced traces; None without any) and
            ``critical_path_llm_phases_ms`` (over the traces with phases; None without any), and
            ``backend_load`` (None unless the inference servers' load was attached to LLM calls):
            ``traces`` with a load, the mean over them of their calls' mean running requests
            (``running_mean``), of the most waiting requests a call met (``waiting_max_mean``),
            the most ever met (``waiting_max``), the highest KV-cache use, the mean prefix-cache
            hit rate and the preemptions per trace.
        """
        # Copied under the lock, computed outside it: the writer waits only for the copies.
        with self._lock:
            copies = [
                (key, program.copy()) for key, program in self._programs.items() if service is None or key[0] == service
            ]
            other_programs = self._other_programs
        copies.sort(key=lambda item: (-item[1].traces, item[0]))
        return {
            "programs": [program.to_dict(*key) for key, program in copies],
            "other_programs": other_programs,
            "since": self.since,
        }
