"""Bottlenecks and slow tools: where the critical path goes, and what removing it would give."""

from __future__ import annotations

from ..categories import TOOL
from ..profile import SpanProfile, TraceProfile
from .base import (
    BOTTLENECK,
    DEFAULT_OPTIONS,
    SLOW_TOOL,
    Finding,
    FindingOptions,
    _label,
    _percent,
    _projected,
    _share,
    format_duration,
)


def find_bottlenecks(profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS) -> list[Finding]:
    """The top spans and operations by critical-path time, with the saving of removing their
    own time (``saving_ns``) and of making it 2x faster."""
    ranked = sorted(
        (s for s in profile.spans if s.critical_path_ns > 0),
        key=lambda s: (-s.critical_path_ns, s.start_ns, s.record.span_id),
    )[: options.top_n]
    findings = [_bottleneck(profile, [span], "span", _label(span)) for span in ranked]
    reported = {(span,) for span in ranked}
    for (category, operation), spans in _top_operations(profile, options.top_n):
        if tuple(spans) in reported:
            continue  # the operation is one span, already reported as such
        label = _label(spans[0]) if len(spans) == 1 else f"{category} {operation} ({len(spans)} spans)"
        findings.append(_bottleneck(profile, spans, "operation", label))
    return findings


def _top_operations(profile: TraceProfile, top_n: int) -> list[tuple[tuple[str, str], list[SpanProfile]]]:
    spans_of: dict[tuple[str, str], list[SpanProfile]] = {}
    for span in profile.spans:
        spans_of.setdefault((span.category, span.operation), []).append(span)
    ranked = sorted(
        ((key, op.critical_path_ns) for key, op in profile.operations.items() if op.critical_path_ns > 0),
        key=lambda item: (-item[1], item[0]),
    )[:top_n]
    return [(key, spans_of[key]) for key, _ in ranked]


def _bottleneck(profile: TraceProfile, spans: list[SpanProfile], scope: str, label: str) -> Finding:
    critical = sum(s.critical_path_ns for s in spans)
    removed, saving = _projected(profile, spans, 0.0)
    halved, saving_2x = _projected(profile, spans, 0.5)
    share = _share(critical, profile.critical_path_ns)
    first = spans[0]
    return Finding(
        kind=BOTTLENECK,
        title=(
            f"{label} holds {format_duration(critical)} of the critical path ({_percent(share)}); "
            f"without its own time the trace ends {format_duration(saving)} sooner, "
            f"2x faster {format_duration(saving_2x)} sooner"
        ),
        saving_ns=saving,
        span_ids=tuple(s.record.span_id for s in spans),
        operation=first.operation,
        category=first.category,
        evidence={
            "scope": scope,
            "spans": len(spans),
            "critical_path_ns": critical,
            "critical_path_share": share,
            "self_time_ns": sum(s.self_time_ns for s in spans),
            "duration_ns": profile.duration_ns,
            "projected_duration_without_ns": removed,
            "projected_duration_2x_faster_ns": halved,
            "saving_if_2x_faster_ns": saving_2x,
        },
    )


def find_slow_tools(profile: TraceProfile, options: FindingOptions = DEFAULT_OPTIONS) -> list[Finding]:
    """Tool spans whose self time is at least ``slow_tool_ms`` or ``slow_tool_share`` of the trace."""
    threshold_ns = round(options.slow_tool_ms * 1e6)
    duration = profile.duration_ns
    findings: list[Finding] = []
    tools = [s for s in profile.spans if s.category == TOOL and s.self_time_ns > 0]
    tools.sort(key=lambda s: (-s.self_time_ns, s.start_ns, s.record.span_id))
    for span in tools:
        if span.self_time_ns < threshold_ns and span.self_time_ns < options.slow_tool_share * duration:
            continue
        share = _share(span.self_time_ns, duration)
        removed, saving = _projected(profile, [span], 0.0)
        halved, saving_2x = _projected(profile, [span], 0.5)
        findings.append(
            Finding(
                kind=SLOW_TOOL,
                title=(
                    f"tool {span.operation} took {format_duration(span.self_time_ns)} itself "
                    f"({_percent(share)} of the trace); without it the trace would end {format_duration(saving)} sooner"
                ),
                saving_ns=saving,
                span_ids=(span.record.span_id,),
                operation=span.operation,
                category=TOOL,
                evidence={
                    "self_time_ns": span.self_time_ns,
                    "duration_ns": span.duration_ns,
                    "trace_share": share,
                    "on_critical_path": span.on_critical_path,
                    "critical_path_ns": span.critical_path_ns,
                    "threshold_ns": threshold_ns,
                    "threshold_share": options.slow_tool_share,
                    "projected_duration_without_ns": removed,
                    "saving_if_2x_faster_ns": saving_2x,
                    "projected_duration_2x_faster_ns": halved,
                },
            )
        )
    return findings
