"""ATIF trajectories (the Agent Trajectory Interchange Format of agent evaluation harnesses) to span records.

An ATIF trajectory is one agent run: ``{"schema_version": "ATIF-v1.x", "session_id", "agent": {...},
"steps": [...]}``. A file holds one, a JSON list of them, or one a line (JSON Lines); each
trajectory is one trace. Each step has a ``timestamp`` (when it was recorded) and a ``source`` (system,
user or agent); agent steps may carry ``metrics`` (tokens, cost), ``tool_calls`` and an
``observation`` with the tools' results.

ATIF records when steps happened, not how long each call took, so the spans are laid out from the
step timestamps:

* the run is an ``invoke_agent`` span from the first step to the last;
* an agent step took the time since the previous step: first its LLM call (when it has metrics),
  then its tool calls one after another (their results are part of the step), each getting an
  equal part of that time. ATIF does not say how long each part took, nor whether tools ran in
  parallel; sequential is what most harnesses do.

Every such span carries ``agent_profiler.timing = "estimated"`` so reports can say so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, NamedTuple

from ..core.records import AttributeValue, SpanKind, SpanRecord, StatusCode
from .recorded_attributes import COST_USD, TIMING, TIMING_ESTIMATED


def is_atif_document(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("schema_version"), str)
        and document["schema_version"].upper().startswith("ATIF")
        and isinstance(document.get("steps"), list)
    )


def is_atif_list(document: Any) -> bool:
    """A JSON list of trajectories: a list with at least one trajectory (other items are errors)."""
    return isinstance(document, list) and any(is_atif_document(item) for item in document)


def _id(*parts: object, size: int) -> str:
    import hashlib  # here: reading any trace file loads this module, and only ATIF needs hashlib

    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[: 2 * size]


def _timestamp_ns(value: Any) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        when = int(moment.timestamp() * 1_000_000) * 1000
    except (OverflowError, ValueError):  # the edges of the datetime range, shifted by a time zone
        return None
    # Before 1970 is not a time a trace can have (span times are unsigned nanoseconds since then).
    return when if when >= 0 else None


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one: an ATIF field of the wrong type is ignored."""
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def records_from_atif(
    document: Mapping[str, Any], problems: list[str], where: str = "", position: int | None = None
) -> list[SpanRecord]:
    """Span records of one trajectory; unusable steps are skipped and described in ``problems``,
    each prefixed with ``where`` (``"line 3: "``).

    ``position`` is the trajectory's place in a file of several (list index or line number): it
    is part of the trace id, so that each trajectory is its own trace even when two share a
    session id or have none. A file of one trajectory gives ``None``: its trace id is the session's.
    """
    session = str(document.get("session_id") or "")
    agent: Mapping[str, Any] = document["agent"] if isinstance(document.get("agent"), Mapping) else {}
    agent_name = str(agent.get("name") or "agent")
    default_model = agent.get("model_name")
    trace_id = _id("atif", session, size=16) if position is None else _id("atif", session, position, size=16)
    resource: dict[str, AttributeValue] = {"service.name": agent_name, "atif.session_id": session}
    if agent.get("version"):
        resource["service.version"] = str(agent["version"])

    steps: list[tuple[int, Mapping[str, Any]]] = []
    for index, step in enumerate(document["steps"]):
        if not isinstance(step, Mapping):
            problems.append(f"{where}steps[{index}]: not an object")
            continue
        when = _timestamp_ns(step.get("timestamp"))
        if when is None:
            problems.append(f"{where}steps[{index}]: missing or unreadable timestamp {step.get('timestamp')!r}")
            continue
        steps.append((when, step))
    if not steps:
        if document["steps"]:
            problems.append(f"{where}no step has a usable timestamp, so the run cannot be laid out in time")
        return []
    steps.sort(key=lambda item: item[0])

    root_id = _id(trace_id, "root", size=8)
    records = [
        SpanRecord(
            trace_id,
            root_id,
            None,
            f"invoke_agent {agent_name}",
            steps[0][0],
            steps[-1][0],
            SpanKind.INTERNAL,
            StatusCode.UNSET,
            "",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent_name,
                "gen_ai.conversation.id": session,
            },
            resource=resource,
        )
    ]
    previous = steps[0][0]
    for when, step in steps:
        if step.get("source") == "agent":
            records.extend(_step_records(trace_id, root_id, step, previous, when, default_model))
        previous = when
    for record in records:
        record.resource = resource
    return records


def _step_records(
    trace_id: str, root_id: str, step: Mapping[str, Any], start: int, end: int, default_model: object
) -> list[SpanRecord]:
    step_id = step.get("step_id", start)
    metrics = step["metrics"] if isinstance(step.get("metrics"), Mapping) else None
    calls = [call for call in _list(step.get("tool_calls")) if isinstance(call, Mapping)]
    parts = (1 if metrics is not None else 0) + len(calls)
    if not parts:
        return []
    share = (end - start) // parts

    def bounds(index: int) -> tuple[int, int]:
        return start + index * share, end if index == parts - 1 else start + (index + 1) * share

    place = _StepPlace(trace_id, root_id, step_id, step)
    records = []
    if metrics is not None:
        records.append(_llm_record(place, metrics, *bounds(0), default_model))
    first_tool = len(records)
    records.extend(_tool_record(place, call, index, *bounds(first_tool + index)) for index, call in enumerate(calls))
    return records


class _StepPlace(NamedTuple):
    """Where the records of one agent step go: its trace, under the run's root span, named by the step."""

    trace_id: str
    root_id: str
    step_id: object
    step: Mapping[str, Any]


def _llm_record(
    place: _StepPlace, metrics: Mapping[str, Any], start: int, end: int, default_model: object
) -> SpanRecord:
    trace_id, root_id, step_id, step = place
    model = step.get("model_name") or default_model
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        TIMING: TIMING_ESTIMATED,
        "atif.step_id": str(step_id),
    }
    if isinstance(model, str) and model:
        attributes["gen_ai.request.model"] = model
    for key, attribute in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
        ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ):
        value = _int(metrics.get(key))
        if value is not None:
            attributes[attribute] = value
    cost = metrics.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
        attributes[COST_USD] = float(cost)
    # The step's message and tool calls are the call's output: findings look for tool call ids here.
    parts: list[dict[str, Any]] = []
    if isinstance(step.get("message"), str) and step["message"]:
        parts.append({"type": "text", "content": step["message"]})
    for call in _list(step.get("tool_calls")):
        if isinstance(call, Mapping):
            parts.append({"type": "tool_call", "id": call.get("tool_call_id"), "name": call.get("function_name")})
    if parts:
        attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    name = f"chat {model}" if isinstance(model, str) and model else "chat"
    return SpanRecord(
        trace_id,
        _id(trace_id, "llm", step_id, size=8),
        root_id,
        name,
        start,
        end,
        SpanKind.CLIENT,
        attributes=attributes,
    )


def _tool_record(place: _StepPlace, call: Mapping[str, Any], index: int, start: int, end: int) -> SpanRecord:
    trace_id, root_id, step_id, step = place
    observation: Mapping[str, Any] = step["observation"] if isinstance(step.get("observation"), Mapping) else {}
    call_id = call.get("tool_call_id")
    result = next(
        (
            r
            for r in _list(observation.get("results"))
            if isinstance(r, Mapping) and call_id and r.get("source_call_id") == call_id
        ),
        None,
    )
    name = str(call.get("function_name") or "tool")
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        TIMING: TIMING_ESTIMATED,
        "atif.step_id": str(step_id),
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = str(call_id)
    if "arguments" in call:
        attributes["gen_ai.tool.call.arguments"] = json.dumps(call["arguments"], sort_keys=True)
    status = StatusCode.ERROR if result is not None and result.get("is_error") is True else StatusCode.UNSET
    return SpanRecord(
        trace_id,
        _id(trace_id, "tool", step_id, index, call_id, size=8),
        root_id,
        f"execute_tool {name}",
        start,
        end,
        SpanKind.INTERNAL,
        status,
        attributes=attributes,
    )
