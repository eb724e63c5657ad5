"""Cutting an OTLP export request into smaller ones that carry the same items, for the forwarder.

An upstream limits the bytes of a request (gRPC's default, rotel's and the OpenTelemetry
Collector's, is 4 MiB), and a slow one the items it can take within the export timeout. A request
over either is cut in two halves by its items (spans, metrics, log records), each half keeping the
resource and scope its items came with, as often as needed. The structure is read from the
messages themselves, so traces, metrics and logs are cut alike.
"""

from __future__ import annotations

from typing import Any

from .signals import Signal


def _repeated(field: Any) -> bool:
    # ``is_repeated`` in newer protobuf releases, ``label`` in older ones.
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _children_field(message: Any) -> str:
    """The name of the one repeated message field under a resource or scope (``scope_spans``, ``spans``, ...)."""
    for field in message.DESCRIPTOR.fields:
        if field.message_type is not None and _repeated(field) and field.name != "attributes":
            return str(field.name)
    raise ValueError(f"{message.DESCRIPTOR.full_name} holds no items")


def _without(message: Any, field_name: str) -> Any:
    """A copy of ``message`` without ``field_name`` (its children), made without copying them."""
    copy = type(message)()
    for field, value in message.ListFields():
        if field.name == field_name:
            continue
        if _repeated(field):
            getattr(copy, field.name).extend(value)
        elif field.message_type is not None:
            getattr(copy, field.name).CopyFrom(value)
        else:
            setattr(copy, field.name, value)
    return copy


def leaf_count(request: Any, signal: Signal) -> int:
    """How many pieces ``request`` can be cut into: its spans, metrics or log records."""
    total = 0
    for resource in getattr(request, signal.resources_field):
        scopes = getattr(resource, _children_field(resource))
        for scope in scopes:
            total += len(getattr(scope, _children_field(scope)))
    return total


def halves(request: Any, signal: Signal) -> tuple[Any, Any]:
    """``request`` cut in two by its items, in order; each half keeps their resources and scopes.

    Raises ``ValueError`` when it holds fewer than two items.
    """
    leaves: list[tuple[Any, str, Any, str, Any]] = []
    for resource in getattr(request, signal.resources_field):
        scope_field = _children_field(resource)
        for scope in getattr(resource, scope_field):
            leaf_field = _children_field(scope)
            for leaf in getattr(scope, leaf_field):
                leaves.append((resource, scope_field, scope, leaf_field, leaf))
    if len(leaves) < 2:
        raise ValueError("a request of one item cannot be cut")
    middle = len(leaves) // 2
    return _build(leaves[:middle], signal), _build(leaves[middle:], signal)


def _build(leaves: list[tuple[Any, str, Any, str, Any]], signal: Signal) -> Any:
    request = signal.request_class()
    resources = getattr(request, signal.resources_field)
    copies: dict[int, Any] = {}
    for resource, scope_field, scope, leaf_field, leaf in leaves:
        scope_copy = copies.get(id(scope))
        if scope_copy is None:
            resource_copy = copies.get(id(resource))
            if resource_copy is None:
                resources.append(_without(resource, scope_field))
                resource_copy = copies[id(resource)] = resources[-1]
            getattr(resource_copy, scope_field).append(_without(scope, leaf_field))
            scope_copy = copies[id(scope)] = getattr(resource_copy, scope_field)[-1]
        getattr(scope_copy, leaf_field).append(leaf)
    return request
