"""Repeated tool calls: the same tool called more than once with the same arguments."""

from __future__ import annotations

from ..categories import TOOL
from ..profile import SpanProfile, TraceProfile
from ..projection import RecordedSchedule
from .base import (
    DEFAULT_OPTIONS,
    Finding,
    FindingOptions,
    _by_start,
    _plural,
    _projected,
    _with_descendants,
    format_duration,
    where,
)

REPEATED_TOOL_CALL = "repeated_tool_call"

_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "input.value", "tool.parameters")


def tool_arguments(span: SpanProfile) -> str | None:
    """The arguments a tool span was called with, as a string to compare calls by, if recorded.

    OpenInference's ``tool.parameters`` is often the tool's JSON Schema rather than the call's
    arguments; a value that looks like a schema is not taken as arguments.
    """
    attributes = span.record.attributes
    for key in _ARGUMENT_KEYS:
        value = attributes.get(key)
        if value is None or value == "":
            continue
        text = value if isinstance(value, str) else repr(value)
        if key == "tool.parameters" and '"properties"' in text:
            continue
        return text
    return None


def find_repeated_tool_calls(
    profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS, *, schedule: RecordedSchedule | None = None
) -> list[Finding]:
    """Tool calls with the same tool and the same arguments made more than once in the trace;
    the saving is that of dropping every repeat (with what it called) but the first."""
    calls: dict[tuple[str, str], list[SpanProfile]] = {}
    for span in _by_start(s for s in profile.spans if s.category == TOOL):
        arguments = tool_arguments(span)
        if arguments is not None:
            calls.setdefault((span.operation, arguments), []).append(span)
    findings: list[Finding] = []
    for (tool, arguments), spans in calls.items():
        if len(spans) < 2:
            continue
        repeats = spans[1:]
        projected, saving = _projected(profile, _with_descendants(repeats), 0.0, schedule=schedule)
        findings.append(
            Finding(
                kind=REPEATED_TOOL_CALL,
                title=(
                    f"Tool {tool} was called {len(spans)} times with the same arguments: "
                    + (
                        f"dropping the {_plural(len(repeats), 'repeat')} would end the trace "
                        f"{format_duration(saving)} sooner."
                        if saving > 0
                        else f"the {_plural(len(repeats), 'repeat')} ran beside other work, so dropping them "
                        "saves calls but no time."
                    )
                ),
                suggestion=f"Cache the results of tool {tool} so identical calls are made once.",
                where=where(profile, spans),
                saving_ns=saving,
                span_ids=tuple(s.record.span_id for s in spans),
                operation=tool,
                category=TOOL,
                evidence={
                    "arguments": arguments if len(arguments) <= 200 else arguments[:199] + "…",
                    "calls": len(spans),
                    "repeated_duration_ns": sum(s.duration_ns for s in repeats),
                    "projected_duration_without_repeats_ns": projected,
                },
            )
        )
    return findings
