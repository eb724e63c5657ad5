"""The processor's hooks into the life of its process: exit, fork, and a multiprocessing child's end."""

from __future__ import annotations

import weakref
from typing import Any, Protocol

from ..errors import handle_internal_errors
from .config import ProfilerConfig


class _Processor(Protocol):
    """What the hooks use of the span processor (its module imports this one, hence a protocol)."""

    config: ProfilerConfig

    def shutdown(self) -> None: ...

    def flush_at_exit(self, timeout_millis: int = 30000) -> bool: ...

    def _after_fork(self) -> None: ...


def shutdown_at_exit(ref: weakref.ref[_Processor]) -> None:
    processor = ref()
    if processor is not None:
        processor.shutdown()


def reinit_after_fork(ref: weakref.ref[_Processor]) -> Any:
    @handle_internal_errors("fork")
    def reinit() -> None:
        # The child starts with no worker thread and must not export the parent's spans again.
        processor = ref()
        if processor is not None:
            processor._after_fork()

    return reinit


def flush_when_multiprocessing_exits(processor: _Processor) -> None:
    import multiprocessing.util

    # A high priority: it runs before the finalizers that may close what the exporters use.
    multiprocessing.util.Finalize(processor, _flush_child_at_exit, args=(weakref.ref(processor),), exitpriority=100)


@handle_internal_errors("flush at exit")
def _flush_child_at_exit(ref: weakref.ref[_Processor]) -> None:
    processor = ref()
    if processor is not None:
        processor.flush_at_exit(timeout_millis=int(processor.config.shutdown_timeout_s * 1000))
