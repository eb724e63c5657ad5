"""Per-trace work spread over worker processes, so that a large input uses every core.

The offline commands profile, find and encode one trace at a time, and the traces do not depend
on each other: a natural fit for processes (threads would share one interpreter lock). The work
is a function of an item's index into data the command already holds. Workers are *forked*, so
they start with that data and nothing is sent to them; only the results come back, pickled, in
input order. Where :func:`worker_context` says not to fork, or the input is small, the work runs
in the calling process, with the same results.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .limits import MAX_AUTO_WORKERS as MAX_AUTO_WORKERS, MIN_SPANS_FOR_WORKERS as MIN_SPANS_FOR_WORKERS

if TYPE_CHECKING:
    import multiprocessing.context

Result = TypeVar("Result")

#: How many items a worker takes at a time: enough to make sending results cheap, few enough
#: that the workers finish together.
_CHUNKS_PER_WORKER = 16
_MAX_CHUNK = 256
#: How long :func:`worker_context` waits for threads that ended to be gone.
_THREADS_ENDING_S = 0.05


def can_fork() -> bool:
    """Whether worker processes can be forked here (Linux and the BSDs; not Windows or macOS)."""
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask") and sys.platform != "darwin"


def _threads() -> int:
    """The threads this process runs, as the operating system counts them (native ones too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _threads_after_ending() -> int:
    """:func:`_threads`, once the threads that have ended in Python (an earlier pool's, a store
    fetch's) are gone from the operating system too: they take a moment, and hold no lock."""
    deadline = time.monotonic() + _THREADS_ENDING_S
    while (threads := _threads()) > 1 and threading.active_count() == 1 and time.monotonic() < deadline:
        time.sleep(0.002)
    return threads


def worker_context() -> multiprocessing.context.BaseContext:
    """How to start worker processes: the one rule, for ``--workers``' pool and ``diff``'s two sides.

    *Fork* where the platform forks dependably (:func:`can_fork`) and this process runs no other
    thread, as the operating system counts them (numpy's OpenBLAS pool counts; so does CPython
    3.12, which warns when it forks a process with threads). A fork copies only the calling thread:
    a lock another thread held (a queue, a connection pool, a library's own pool) stays held for
    ever in the child, which deadlocks on it. Without other threads a fork is the cheapest start
    there is: the worker begins at once with every module and every record already loaded
    (copy-on-write), and nothing is pickled to it.

    Otherwise *spawn*: a fresh interpreter, safe whatever runs here, paying its start-up and
    imports (pandas' among them, for ``diff``) and the pickling of what is sent.
    A caller whose work cannot be sent (``map_in_order``'s closures over the data already loaded)
    runs it in this process instead.

    Measured with ``diff`` (its two sides in two workers, 2 cores): forked before pandas is imported,
    the command took 0.65x (200 against 1,500 spans) and 0.8x (10,600 against 10,600) the time it
    took with spawned workers.
    """
    # Imported here: most runs start no worker, and the module costs every command's start-up.
    import multiprocessing

    if can_fork() and _threads_after_ending() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def workers_for(requested: int | None, spans: int) -> int:
    """How many processes to use: ``requested`` (``--workers``) when given, else one per available
    core (at most ``MAX_AUTO_WORKERS``) for inputs of ``MIN_SPANS_FOR_WORKERS`` spans or more, else 1.

    Always 1 where processes cannot be forked (``map_in_order`` then runs the work here).
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
    ``work`` itself. With one worker, or where :func:`worker_context` would not fork (another
    thread runs, or the platform cannot), everything runs here.
    Results are produced ahead of the consumer: a slow consumer holds at most every result.
    """
    context = worker_context() if workers > 1 and count > 1 else None
    if context is None or context.get_start_method() != "fork":
        for index in range(count):
            yield work(index)
        return
    global _work
    chunk = max(1, min(_MAX_CHUNK, count // (workers * _CHUNKS_PER_WORKER)))
    bounds = [(start, min(start + chunk, count)) for start in range(0, count, chunk)]
    _work = work
    try:
        with _interrupts_blocked_for_children():
            pool = context.Pool(min(workers, len(bounds)))
        with pool:
            for results in pool.imap(_run_chunk, bounds):
                yield from results
    finally:
        _work = None
