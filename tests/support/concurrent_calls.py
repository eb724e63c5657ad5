"""Calls made at once from threads, as an agent fans out: their spans are children of the caller's span."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from opentelemetry import context


def run_at_once(work: Iterable[Callable[[], object]]) -> None:
    """Run each callable on a thread of its own, all started together, each in the caller's
    OpenTelemetry context (threads do not inherit it); returns when every one has ended."""
    caller = context.get_current()

    def in_context(call: Callable[[], object]) -> None:
        context.attach(caller)
        call()

    threads = [threading.Thread(target=in_context, args=(call,)) for call in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
