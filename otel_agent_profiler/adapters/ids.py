"""Normalising trace and span ids to lowercase hex, whatever encoding a file used."""

from __future__ import annotations

import base64
import binascii

from ..errors import BadIdError

_HEX_DIGITS = frozenset("0123456789abcdef")


def normalize_id(value: object, size: int, what: str) -> str:
    """Return ``value`` as ``2 * size`` lowercase hex characters.

    OTLP/JSON writes ids as hex, but the generic protobuf JSON mapping writes base64; Jaeger
    writes 64-bit trace ids as 16 hex characters. All are accepted.
    """
    if not isinstance(value, str) or not value:
        raise BadIdError(f"{what} is missing")
    width = 2 * size
    if len(value) == width:
        # bytes.fromhex is the fastest strict hex check; it tolerates spaces, but a string
        # of exactly ``width`` characters holding one would decode to too few bytes.
        try:
            if len(bytes.fromhex(value)) == size:
                return value.lower()
        except ValueError:
            pass
    elif len(value) < width and _HEX_DIGITS.issuperset(value.lower()):
        # Jaeger writes 64-bit trace ids; OpenTelemetry left-pads them with zeros.
        return value.lower().rjust(width, "0")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw.hex()
    raise BadIdError(f"{what} {value!r} is not a {width}-digit hex id")


def normalize_parent_id(value: object) -> str | None:
    """A parent span id, or ``None`` for the empty and all-zero ids that mean "no parent"."""
    if value is None or value == "":
        return None
    parent = normalize_id(value, 8, "parentSpanId")
    return None if parent == "0" * 16 else parent


class KnownIds:
    """Ids already validated while reading one document, raw form to normalised form.

    Ids repeat (every span of a trace has its trace id, every parent is some span's id), so
    each distinct one is validated once. Trace and span ids are kept apart: the same 16
    hex digits normalise differently as a trace id (left-padded to 32) and as a span id.
    """

    __slots__ = ("spans", "traces")

    def __init__(self) -> None:
        self.traces: dict[str, str] = {}
        self.spans: dict[str, str] = {}
