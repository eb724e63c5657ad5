"""Per-trace work spread over worker processes, so that a large input uses every core.

The offline commands profile, find and encode one trace at a time, and the traces do not depend
on each other: a natural fit for processes (threads would share one interpreter lock). The work
is a function of an item's index into data the command already holds. Workers are *forked*, so
they start with that data and nothing is sent to them; only the results come back, pickled, in
input order. Where ``fork`` is missing or unsafe (Windows, macOS), or the input is small, the
work runs in the calling process, with the same results.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

Result = TypeVar("Result")

#: Below this many spans starting processes costs more than it saves.
MIN_SPANS_FOR_WORKERS = 20_000
#: The most workers chosen without being asked: more rarely pay for their memory.
MAX_AUTO_WORKERS = 8
#: How many items a worker takes at a time: enough to make sending results cheap, few enough
#: that the workers finish together.
_CHUNKS_PER_WORKER = 16
_MAX_CHUNK = 256


def can_fork() -> bool:
    """Whether worker processes can be forked here (Linux and the BSDs; not Windows or macOS)."""
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask") and sys.platform != "darwin"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def workers_for(requested: int | None, spans: int) -> int:
    """How many processes to use: ``requested`` (``--workers``) when given, else one per available
    core (at most ``MAX_AUTO_WORKERS``) for inputs of ``MIN_SPANS_FOR_WORKERS`` spans or more, else 1.

    Always 1 where processes cannot be forked.
    """
    if not can_fork():
        return 1
    if requested is not None:
        return max(1, requested)
    if spans < MIN_SPANS_FOR_WORKERS:
        return 1
    return min(available_cores(), MAX_AUTO_WORKERS)


# The work of the current map: set before the workers are forked, so each of them has it.
_work: Callable[[int], Any] | None = None


@contextmanager
def _interrupts_blocked_for_children() -> Iterator[None]:
    """Workers forked in the block never see Ctrl-C; the parent gets one that came meanwhile after it.

    Ctrl-C reaches the whole process group: the parent stops the workers and exits 130, and a
    traceback from every worker would bury its one line. Blocked (not ignored) while forking:
    the workers inherit the blocked signal, and one that arrives meanwhile waits for the parent.
    """
    blocked = {signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)


def _run_chunk(bounds: tuple[int, int]) -> list[Any]:
    work = _work
    assert work is not None, "forked without work"
    return [work(index) for index in range(*bounds)]


def map_in_order(work: Callable[[int], Result], count: int, workers: int) -> Generator[Result, None, None]:
    """``work(0)``, ``work(1)``, ... ``work(count - 1)``, in that order, computed by ``workers`` processes.

    ``work`` runs in forked copies of this process, so it sees everything this process held when
    the map started, and changes it makes stay in the worker. Its results must pickle. An
    exception it raises is raised here, for the item it was raised for; handle expected ones in
    ``work`` itself. With one worker (or where forking is not possible) everything runs here.
    Results are produced ahead of the consumer: a slow consumer holds at most every result.
    """
    if workers <= 1 or count <= 1 or not can_fork():
        for index in range(count):
            yield work(index)
        return
    global _work
    chunk = max(1, min(_MAX_CHUNK, count // (workers * _CHUNKS_PER_WORKER)))
    bounds = [(start, min(start + chunk, count)) for start in range(0, count, chunk)]
    _work = work
    try:
        context = multiprocessing.get_context("fork")
        with _interrupts_blocked_for_children():
            pool = context.Pool(min(workers, len(bounds)))
        with pool:
            for results in pool.imap(_run_chunk, bounds):
                yield from results
    finally:
        _work = None
