"""``analyze``'s JSON document, written the same whichever road profiled the traces: in memory,
in halves (``offline.halves``) or shard by shard (``offline.on_disk``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .arguments import write_streamed

if TYPE_CHECKING:
    from ..core import TraceProfile
    from ..core.split_traces import Counted, TraceCalls


def write_json_report(
    output: str | None,
    files: list[dict[str, Any]],
    traces: Sequence[Counted],
    calls: Iterable[TraceProfile | TraceCalls],
    documents: Iterable[Any],
    *,
    second_process: bool = False,
    more: Mapping[str, Any] | None = None,
) -> bool:
    """Write ``analyze``'s JSON document, whichever road profiled the traces: whether it was written.

    ``traces`` (what the totals read of each) and ``calls`` (what finding split LLM calls reads)
    in trace order, ``documents`` each trace's JSON (``write_document``'s items), ``more``: keys
    after the split calls.
    """
    from ..core.split_traces import cross_trace_totals, find_split_llm_calls
    from ..report.json_stream import write_document

    splits = find_split_llm_calls(calls)
    rest: dict[str, Any] = {
        "files": files,
        "totals": cross_trace_totals(traces, splits).to_dict(),
        "split_llm_calls": [split.to_dict() for split in splits],
        **(more or {}),
    }
    return write_streamed(
        output, lambda out: write_document(out, "traces", documents, rest, second_process=second_process)
    )
