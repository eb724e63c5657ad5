"""Writing large JSON documents a piece at a time, with a fast encoder.

``json.dumps(document, indent=2)`` over 200,000 spans falls back to the pure-Python encoder and
takes several times as long as reading the input; it also needs the whole document, and its text,
in memory at once. Here each piece (one trace, say) is encoded by msgspec, indented by
``msgspec.json.format`` and written out before the next one is built. The text is what
``json.dumps(document, indent=2)`` writes, except that non-ASCII characters are written as UTF-8
rather than ``\\uXXXX`` escapes and a few floats are spelled differently (``0.00001`` for
``1e-05``); parsed back, the documents are equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, BinaryIO

import msgspec

_encode = msgspec.json.Encoder().encode
#: ``value`` as compact JSON (what ``msgspec.json.encode`` writes).
encode_compact = _encode


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def _framing(depth: int) -> tuple[int, int]:
    """How many bytes the lists of ``_nested(value, depth)`` add before and after the value, formatted."""
    before, after = msgspec.json.format(_encode(_nested(0, depth)), indent=2).split(b"0")
    return len(before), len(after)


#: By depth: the bytes to cut from the front and the back of a formatted ``_nested(value, depth)``.
_FRAMING = {depth: _framing(depth) for depth in range(4)}


def pretty(value: Any, depth: int = 0) -> bytes:
    """``value`` as JSON indented by two spaces, as if nested ``depth`` levels deep in a document.

    The first line carries no indentation (it follows a key or a list's own indentation).
    """
    if not depth:
        return msgspec.json.format(_encode(value), indent=2)
    # Formatted inside ``depth`` lists, the value comes out indented as deep as it will be written:
    # cutting the lists' brackets off is cheaper than indenting every line of it again.
    front, back = _FRAMING.get(depth) or _framing(depth)
    text = msgspec.json.format(_encode(_nested(value, depth)), indent=2)
    return text[front : len(text) - back]


class Encoded(bytes):
    """An item already encoded as the writer would encode it (e.g. by a worker process): as
    ``pretty(item, depth)`` for :func:`write_document`, compact for :func:`write_compact_document`."""


def write_document(out: BinaryIO, streamed_key: str, items: Iterable[Any], rest: dict[str, Any]) -> None:
    """Write ``{streamed_key: [*items], **rest}`` to ``out``, indented by two spaces, then a newline.

    ``items`` is consumed one at a time and each item is written before the next is asked for, so
    a generator that builds them keeps one item in memory, not the whole list. An ``Encoded``
    item is written as it is: it must be ``pretty(item, 2)``.
    """
    out.write(b'{\n  "' + streamed_key.encode("ascii") + b'": [')
    separator = b"\n    "
    empty = True
    for item in items:
        out.write(separator)
        out.write(item if isinstance(item, Encoded) else pretty(item, 2))
        separator = b",\n    "
        empty = False
    out.write(b"]" if empty else b"\n  ]")
    for key, value in rest.items():
        out.write(b",\n  " + _encode(key) + b": " + pretty(value, 1))
    out.write(b"\n}\n")


def write_compact_document(out: BinaryIO, document: dict[str, Any], streamed_key: str) -> None:
    """Write ``document`` to ``out`` as compact JSON and a newline, ``document[streamed_key]`` an iterable.

    The bytes are ``msgspec.json.encode(document) + b"\\n"`` had the iterable been a list; its items
    are encoded and written one at a time (an ``Encoded`` item as it is: compact JSON).
    """
    opening = b"{"
    for key, value in document.items():
        out.write(opening + _encode(key) + b":")
        opening = b","
        if key != streamed_key:
            out.write(_encode(value))
            continue
        separator = b"["
        for item in value:
            out.write(separator)
            out.write(item if isinstance(item, Encoded) else _encode(item))
            separator = b","
        out.write(b"[]" if separator == b"[" else b"]")
    out.write(b"{}\n" if opening == b"{" else b"}\n")
