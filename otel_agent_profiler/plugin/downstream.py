"""Handing spans to the exporting processors at a pace they can take.

Without the profiler, an application ends its spans one at a time, and a ``BatchSpanProcessor``
exports them while the application runs. The profiler holds a trace until it completes and then
hands all its spans over at once: 5,000 spans in a burst overrun the batch processor's queue
(2,048 by default), which drops the oldest ("Queue full, dropping Span"). So the worker waits for
room in a batching processor's queue before each span, as long as the queue drains. A queue that
stays full (an exporter that hangs), or a deadline (flush or shutdown) that passes, ends the wait:
spans that then find no room are not handed over but counted, so what the queue could not take
is reported rather than dropped without a word. Spans handed over on the application's thread
(late or sampled-out spans) are never paced: it must not wait on the exporter.

A processor with no queue (a ``SimpleSpanProcessor``) exports inside ``on_end``: one whose exporter
hangs holds the hand-over there for good. The spans given to be handed (``expect``) and not handed
yet are then what it will never take: ``abandon`` ends the hand-over and says how many, for the
shutdown to count, and ``shutdown`` gives the processors a deadline instead of waiting on them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.context import Context, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from .._sdk_internals import batch_queue
from ..errors import handle_internal_errors

_logger = logging.getLogger(__name__)

# Key the OpenTelemetry SDK and instrumentations check to keep exporter traffic untraced.
_SUPPRESS_INSTRUMENTATION_KEY = "suppress_instrumentation"
#: How long a full queue may go without draining before the worker stops waiting for it. An
#: OTLP exporter gives up on a batch within its 10 s timeout, freeing the batch's room in its queue.
STALL_S = 30.0
# Room the application's threads leave in a queue for the worker, which checks for room and then
# adds a span: so many threads adding at once still cannot overfill it between check and add.
_SLACK = 64
_FIRST_SLEEP_S = 0.0005
_LONGEST_SLEEP_S = 0.05

# The guards of the calls made for every span, made once (they keep no state).
_ON_START_GUARD = handle_internal_errors("downstream on_start")
_ON_END_GUARD = handle_internal_errors("downstream on_end")

# Processors whose on_start is known to do nothing; calling them on the app's thread is waste.
_NO_OP_ON_START = {SpanProcessor.on_start, BatchSpanProcessor.on_start, SimpleSpanProcessor.on_start}


class Downstream:
    """The processors the profiler hands spans to, each with its queue when it has one."""

    def __init__(self, processors: Sequence[SpanProcessor] = ()) -> None:
        # Tuples, replaced whole when a processor is added, so iterating them on another thread is safe.
        self.processors: tuple[SpanProcessor, ...] = ()
        #: The processors whose on_start does something: the profiler calls them on the app's thread.
        self.with_on_start: tuple[SpanProcessor, ...] = ()
        self._queues: tuple[tuple[SpanProcessor, deque[Any] | None], ...] = ()
        self._limits: tuple[tuple[deque[Any], int], ...] = ()
        # Queues that stayed full past STALL_S: not waited for again until they have room.
        self._stalled: set[int] = set()
        # Spans given to be handed over (expect) and not handed yet; guarded by _progress, which
        # also makes "abandoned" and "this span goes to the processors" one step.
        self._progress = threading.Lock()
        self._unhanded = 0
        self._abandoned = False
        # A shutdown's deadline: it ends every wait for room, also one that began before the
        # shutdown with no deadline of its own (the worker, handing a trace over).
        self._shutdown_at: float | None = None
        for processor in processors:
            self.add(processor)

    def add(self, processor: SpanProcessor) -> None:
        processors = (*self.processors, processor)
        self.with_on_start = tuple(p for p in processors if type(p).on_start not in _NO_OP_ON_START)
        self._queues = tuple((p, batch_queue(p)) for p in processors)
        # The application's threads leave room in each queue for the worker (see _SLACK).
        self._limits = tuple(
            (queue, queue.maxlen - min(_SLACK, queue.maxlen // 4))  # type: ignore[operator]
            for _, queue in self._queues
            if queue is not None
        )
        self.processors = processors

    def on_start(self, span: Span, parent_context: Context | None) -> None:
        for processor in self.with_on_start:
            with _ON_START_GUARD:
                processor.on_start(span, parent_context=parent_context)

    def hand(self, spans: Sequence[ReadableSpan]) -> int:
        """Hand spans over now, in order, while every queue has room (the application's thread:
        it never waits). Returns how many were handed: the rest found a queue (nearly) full."""
        limits = self._limits
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            for handed, span in enumerate(spans):
                for queue, limit in limits:
                    if len(queue) >= limit:
                        return handed
                for processor in self.processors:
                    with _ON_END_GUARD:
                        processor.on_end(span)
        finally:
            detach(token)
        return len(spans)

    def hand_paced(self, spans: Iterable[ReadableSpan], give_up_at: float | None = None) -> int:
        """Hand spans over, waiting for room in full queues until ``give_up_at`` (clock time).

        Returns:
            How many hand-overs found no room and were not made (a span counts once per
            processor that could not take it).
        """
        lost = 0
        # The exporters' own HTTP calls must not be traced by the app's instrumentation.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            for span in spans:
                with self._progress:
                    if self._abandoned:
                        # Counted by whoever abandoned the hand-over, or (given after it) not ours.
                        break
                    self._unhanded -= 1
                for processor, queue in self._queues:
                    if queue is not None and len(queue) >= queue.maxlen and not self._room(queue, give_up_at):  # type: ignore[operator]
                        lost += 1
                        continue
                    if self._abandoned:
                        # Given up on while it waited for room: the processor may be shut down by
                        # now and would drop the span without a word. Not counted by ``abandon``.
                        lost += 1
                        continue
                    with _ON_END_GUARD:
                        processor.on_end(span)
        finally:
            detach(token)
        return lost

    def _room(self, queue: deque[Any], give_up_at: float | None) -> bool:
        """Wait until ``queue`` has room; False when it stalls or ``give_up_at`` passes first."""
        maxlen: int = queue.maxlen  # type: ignore[assignment]
        if id(queue) in self._stalled:
            return False
        last_length = len(queue)
        last_progress = time.monotonic()
        sleep = _FIRST_SLEEP_S
        while len(queue) >= maxlen:
            now = time.monotonic()
            if self._shutdown_at is not None and (give_up_at is None or self._shutdown_at < give_up_at):
                give_up_at = self._shutdown_at
            if give_up_at is not None and now >= give_up_at:
                return False
            if len(queue) < last_length:
                last_progress = now
            elif now - last_progress >= STALL_S:
                self._stalled.add(id(queue))
                return False
            last_length = len(queue)
            wait = sleep if give_up_at is None else min(sleep, max(0.0, give_up_at - now))
            time.sleep(wait)
            sleep = min(sleep * 2, _LONGEST_SLEEP_S)
        return True

    def give_up_by(self, deadline: float) -> None:
        """Shutdown's deadline (clock time): from now on no wait for room lasts past it."""
        self._shutdown_at = deadline

    def expect(self, spans: int) -> None:
        """Note ``spans`` more spans taken to be handed over by ``hand_paced``."""
        with self._progress:
            self._unhanded += spans

    def settle(self) -> None:
        """Everything expected was handed over or counted (the end of a worker's round or a drain)."""
        with self._progress:
            self._unhanded = 0

    def abandon(self) -> int:
        """Stop every hand-over for good; returns how many expected spans were not handed over."""
        with self._progress:
            self._abandoned = True
            unhanded, self._unhanded = max(0, self._unhanded), 0
            return unhanded

    def notice_room(self) -> None:
        """Forget stalls of queues that have room again (called by the worker now and then)."""
        if self._stalled:
            for _, queue in self._queues:
                if queue is not None and id(queue) in self._stalled and len(queue) < queue.maxlen:  # type: ignore[operator]
                    self._stalled.discard(id(queue))

    def force_flush(self, deadline: float) -> bool:
        flushed = True
        for processor in self.processors:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            result = False  # what a processor that fails to flush counts as
            with handle_internal_errors("downstream force_flush"):
                result = processor.force_flush(remaining_ms)
            flushed = result and flushed
        return flushed

    def shutdown(self, give_up_at: float) -> int:
        """Shut the processors down, waiting for them until ``give_up_at`` (clock time).

        Returns how many spans were still in the queues of processors not shut down by then:
        they go on in the background, and what they have not exported when the process exits is lost.
        """
        pending = list(self.processors)

        def shut_down_in_turn() -> None:
            while pending:
                with handle_internal_errors("downstream shutdown"):
                    pending[0].shutdown()
                pending.pop(0)

        try:
            # A daemon thread: a processor whose exporter hangs must not keep the application alive.
            thread = threading.Thread(target=shut_down_in_turn, name="otel-agent-profiler shutdown", daemon=True)
            thread.start()
        except RuntimeError:
            # No new threads at interpreter shutdown (Python 3.12+ at exit): shut down here.
            shut_down_in_turn()
            return 0
        thread.join(timeout=max(0.0, give_up_at - time.monotonic()))
        if not thread.is_alive():
            return 0
        queues = dict(self._queues)
        left = sum(len(queue) for processor in list(pending) if (queue := queues.get(processor)) is not None)
        _logger.warning(
            "otel-agent-profiler: %s did not shut down in time; left to finish in the background, "
            "%d spans in their queues are counted as lost",
            ", ".join(type(processor).__name__ for processor in list(pending)),
            left,
        )
        return left
