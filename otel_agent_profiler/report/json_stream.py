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

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import msgspec

from .json_indenter import PieceWriter, indented, indenting_process, nested

_encode = msgspec.json.Encoder().encode
#: ``value`` as compact JSON (what ``msgspec.json.encode`` writes).
encode_compact = _encode


def pretty(value: Any, depth: int = 0) -> bytes:
    """``value`` as JSON indented by two spaces, as if nested ``depth`` levels deep in a document.

    The first line carries no indentation (it follows a key or a list's own indentation).
    """
    if not depth:
        return msgspec.json.format(_encode(value), indent=2)
    return indented(_encode(nested(value, depth)), depth)


class Encoded(bytes):
    """An item already encoded as the writer would encode it (e.g. by a worker process): as
    ``pretty(item, depth)`` for :func:`write_document`, compact for :func:`write_compact_document`."""


def write_document(
    out: BinaryIO, streamed_key: str, items: Iterable[Any], rest: dict[str, Any], *, second_process: bool = False
) -> None:
    """Write ``{streamed_key: [*items], **rest}`` to ``out``, indented by two spaces, then a newline.

    ``items`` is consumed one at a time and each item is written before the next is asked for, so
    a generator that builds them keeps one item in memory, not the whole list. An ``Encoded``
    item is written as it is: it must be ``pretty(item, 2)``.

    ``second_process``: the pieces are indented and written by a second process, which this one
    sends their compact JSON (``json_indenter.indenting_process``): indenting a large document costs
    about what encoding it does. The bytes are the same. Where no second process can write to
    ``out`` (it has no file descriptor), the pieces are indented here.
    """
    with _piece_writer(out, second_process) as write:
        write(b'{\n  "' + streamed_key.encode("ascii") + b'": [', None)
        separator = b"\n    "
        empty = True
        for item in items:
            write(separator, None)
            if isinstance(item, Encoded):
                write(item, None)
            else:
                write(_encode(nested(item, 2)), 2)
            separator = b",\n    "
            empty = False
        write(b"]" if empty else b"\n  ]", None)
        for key, value in rest.items():
            write(b",\n  " + _encode(key) + b": ", None)
            write(_encode(nested(value, 1)), 1)
        write(b"\n}\n", None)


@contextmanager
def _piece_writer(out: BinaryIO, second_process: bool) -> Iterator[PieceWriter]:
    if second_process:
        with indenting_process(out) as send:
            if send is not None:
                yield send
                return

    def write(piece: bytes, depth: int | None) -> None:
        out.write(piece if depth is None else indented(piece, depth))

    yield write


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
