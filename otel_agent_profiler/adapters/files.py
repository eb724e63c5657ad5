"""Reading exported trace files: format detection and clear, per-file error reporting.

Accepted: an OTLP JSON document, OTLP JSON Lines (one document a line, as the Collector's
file exporter writes them), Jaeger's JSON export, and ATIF trajectories (one, a JSON list of
them, or one a line). A file that is none of these gets one
line saying what is wrong; a file that is partly readable yields what it can, plus a line
for what it could not read.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from ..core.records import SpanRecord
from ..errors import InternalErrorLog, SpanDataError
from .atif import is_atif_document, is_atif_list, records_from_atif
from .jaeger_json import is_jaeger_document, records_from_jaeger
from .otlp_json import records_from_otlp
from .otlp_json_typed import records_from_json

OTLP_JSON = "otlp-json"
OTLP_JSON_LINES = "otlp-jsonl"
JAEGER_JSON = "jaeger-json"
ATIF = "atif"
ATIF_JSON_LINES = "atif-jsonl"

_OTLP_KEYS = frozenset({"resourceSpans", "resourceMetrics", "resourceLogs"})

# How many individual problems one file lists before summarising the rest.
_MAX_LISTED_PROBLEMS = 3

# A reader's own bug must not cost the other files their report: the file gets an error line
# instead. Logged at DEBUG so that a command line never prints a traceback for it.
_READER_BUGS = InternalErrorLog(
    logging.getLogger(__name__), "otel-agent-profiler: internal error reading %s", level=logging.DEBUG
)


@dataclass
class TraceFile:
    """What could be read from one file."""

    path: str
    format: str | None
    records: list[SpanRecord] = field(default_factory=list)
    #: Problems, each a short description; empty when the whole file was read.
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def error_line(self, spans: int | None = None) -> str | None:
        """One line naming the file and what is wrong with it, or ``None`` if nothing is.

        ``spans``: how many spans were read, when they were not kept in ``records`` (read a line at a time).
        """
        if not self.problems:
            return None
        spans = len(self.records) if spans is None else spans
        listed = "; ".join(self.problems[:_MAX_LISTED_PROBLEMS])
        more = len(self.problems) - _MAX_LISTED_PROBLEMS
        if more > 0:
            listed += f"; and {more} more"
        if self.format is None or not spans:
            return f"{self.path}: {listed}"
        return f"{self.path}: read {spans} spans but skipped unreadable data: {listed}"


def _json_error(text: str) -> str:
    """Describe why ``text`` is not valid JSON, with the position (stdlib json says where)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        if error.pos >= len(text.rstrip()):
            return f"truncated: the JSON ends unexpectedly at line {error.lineno}"
        return f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}"
    except RecursionError:
        return "JSON nested too deeply to read"
    # Valid JSON to the standard library, which reads numbers of any size: msgspec says what it refused.
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError as error:
        return f"unreadable JSON: {error}"
    except RecursionError:
        return "JSON nested too deeply to read"
    return "malformed JSON"


def _records_from_document(document: Any, trace_file: TraceFile, where: str = "", line: int | None = None) -> bool:
    """Add the spans of one parsed document (the ``line`` of a JSON Lines file, if it is one);
    False when it is not a trace document at all."""
    if isinstance(document, dict) and "resourceSpans" in document:
        trace_file.records.extend(records_from_otlp(document, trace_file.problems, where))
        return True
    if is_jaeger_document(document):
        trace_file.records.extend(records_from_jaeger(document, trace_file.problems))
        return True
    if is_atif_document(document):
        # A trajectory on a line of several is one of many: its line number keeps its trace apart.
        trace_file.records.extend(records_from_atif(document, trace_file.problems, where, line))
        return True
    if is_atif_list(document):
        for index, item in enumerate(document):
            if is_atif_document(item):
                trace_file.records.extend(records_from_atif(item, trace_file.problems, f"{where}[{index}]: ", index))
            else:
                trace_file.problems.append(f"{where}[{index}]: not an ATIF trajectory")
        return True
    return False


def _not_traces(document: Any) -> str:
    if isinstance(document, dict):
        if "resourceMetrics" in document or "resourceLogs" in document:
            return "holds OTLP metrics or logs, not spans"
        keys = ", ".join(sorted(document)[:5]) or "none"
        return f"not OTLP JSON, Jaeger JSON or an ATIF trajectory (top-level keys: {keys})"
    return f"not OTLP JSON, Jaeger JSON or an ATIF trajectory (the document is a JSON {type(document).__name__})"


def _decode(data: bytes) -> Any:
    """Decode any JSON document; every way of failing raises ``msgspec.DecodeError``."""
    try:
        return msgspec.json.decode(data)
    except (UnicodeDecodeError, RecursionError) as exc:
        raise msgspec.DecodeError(str(exc)) from exc


def _decode_otlp(data: bytes) -> list[SpanRecord] | None:
    """The records of a clean OTLP JSON document, or None if it needs the tolerant reader.

    Raises ``msgspec.DecodeError`` when ``data`` is not one JSON document.
    """
    try:
        return records_from_json(data)
    except (msgspec.ValidationError, SpanDataError):
        return None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise msgspec.DecodeError(str(exc)) from exc


def parse_trace_bytes(data: bytes, path: str) -> TraceFile:
    """Read span records from the contents of a trace file. Never raises for bad contents."""
    try:
        return _parse_trace_bytes(data, path)
    except RecursionError:
        return TraceFile(path=path, format=None, problems=["JSON nested too deeply to read"])
    except Exception as exc:
        # Not the guard: our bug becomes the file's problem line, which names the exception.
        _READER_BUGS.report("parse_trace_bytes", path)
        problem = f"could not be read: internal error ({type(exc).__name__}: {exc}); please report it"
        return TraceFile(path=path, format=None, problems=[problem])


def _parse_trace_bytes(data: bytes, path: str) -> TraceFile:
    trace_file = TraceFile(path=path, format=None)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if not data.strip():
        trace_file.problems.append("empty file")
        return trace_file
    try:
        records = _decode_otlp(data)
        # Valid JSON but not a clean OTLP document: Jaeger, OTLP with unusable spans, or neither.
        document = _decode(data) if records is None else None
    except msgspec.DecodeError:
        return _check_not_empty(_parse_broken_or_lines(data, trace_file))
    if records is not None:
        return clean_otlp_file(path, records)
    if is_jaeger_document(document):
        trace_file.format = JAEGER_JSON
    elif isinstance(document, dict) and "resourceSpans" in document:
        trace_file.format = OTLP_JSON
    elif is_atif_document(document) or is_atif_list(document):
        trace_file.format = ATIF
    else:
        trace_file.problems.append(_not_traces(document))
        return trace_file
    _records_from_document(document, trace_file)
    return _check_not_empty(trace_file)


def _parse_broken_or_lines(data: bytes, trace_file: TraceFile) -> TraceFile:
    """Read JSON Lines, or say why ``data`` is neither one JSON document nor JSON Lines."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        trace_file.problems.append(f"not UTF-8 text (invalid byte at offset {exc.start}); is it compressed or binary?")
        return trace_file
    # Only "\n" ends a line: str.splitlines() would also split at U+2028, which JSON allows in strings.
    numbered = [(number, line) for number, line in enumerate(data.split(b"\n"), start=1) if line.strip()]
    decoded: list[tuple[int, bytes, list[SpanRecord] | None, Any]] = []
    is_json_lines = False
    for number, line in numbered:
        records, document = _decode_line(line)
        decoded.append((number, line, records, document))
        if document is _BROKEN:
            continue
        # A Collector file may mix signals, so lines of metrics or logs count as JSON Lines too.
        is_json_lines = is_json_lines or records is not None or _is_otlp(document) or is_atif_document(document)
    if len(numbered) < 2 or not is_json_lines:
        first_document = decoded[0][3]
        if len(numbered) < 2 or first_document is _BROKEN:
            trace_file.problems.append(_json_error(text))
        else:
            trace_file.problems.append(_not_traces(first_document))
        return trace_file

    first = next(document for _, _, records, document in decoded if records is not None or document is not _BROKEN)
    trace_file.format = ATIF_JSON_LINES if is_atif_document(first) else OTLP_JSON_LINES
    last_number = numbered[-1][0]
    for number, line, records, document in decoded:
        trace_file.records.extend(_line_records(trace_file, number, line, records, document, number == last_number))
    return trace_file


def _decode_line(line: bytes) -> tuple[list[SpanRecord] | None, Any]:
    """A line's records when it is a clean OTLP document, else its document (``_BROKEN`` if not JSON)."""
    try:
        records = _decode_otlp(line)
        return records, (_decode(line) if records is None else None)
    except msgspec.DecodeError:
        return None, _BROKEN


def _line_records(
    trace_file: TraceFile,
    number: int,
    line: bytes,
    records: list[SpanRecord] | None,
    document: Any,
    is_last: bool,
) -> list[SpanRecord]:
    """The records of one line of a JSON Lines file; what is wrong with it goes to ``trace_file.problems``."""
    if records is not None:
        return records
    if document is _BROKEN:
        if is_last:
            trace_file.problems.append(f"line {number}: truncated: the last line is incomplete")
        else:
            error = _json_error(line.decode("utf-8", errors="replace"))
            # The error's own line numbers count within the line: "line 1" says nothing here.
            error = error.replace("at line 1, ", "at ").removesuffix(" at line 1")
            trace_file.problems.append(f"line {number}: {error}")
        return []
    if _is_otlp(document) and "resourceSpans" not in document:
        return []  # metrics or logs
    scratch = TraceFile(path=trace_file.path, format=trace_file.format, problems=trace_file.problems)
    if not _records_from_document(document, scratch, where=f"line {number}: ", line=number):
        trace_file.problems.append(f"line {number}: {_not_traces(document)}")
    return scratch.records


def looks_like_json_lines(path: str | Path) -> bool:
    """Whether the file at ``path`` reads as JSON Lines of OTLP (one of its first two lines is a
    whole OTLP document, and it has a second line), without reading all of it."""
    try:
        with open(path, "rb") as stream:
            if not _has_second_line(stream):
                return False
            stream.seek(0)
            lines: list[bytes] = []
            for line in stream:
                if line.strip():
                    lines.append(
                        line[len(codecs.BOM_UTF8) :] if not lines and line.startswith(codecs.BOM_UTF8) else line
                    )
                if len(lines) == 2:
                    break
    except OSError:
        return False
    return any(records is not None or _is_otlp(document) for records, document in map(_decode_line, lines))


_SCAN_CHUNK = 1 << 20
#: A byte that ``bytes.strip()`` keeps: content rather than ASCII whitespace.
_CONTENT = re.compile(rb"[^ \t\n\r\x0b\x0c]")


def _has_second_line(stream: BinaryIO) -> bool:
    """Whether a line with content follows the first line with content, read a chunk at a time: a
    whole OTLP document is one line of up to gigabytes, which reading line by line would hold."""
    first_ended = False  # the first line with content has ended
    in_content = False  # the current line has content so far
    while chunk := stream.read(_SCAN_CHUNK):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            # Within the first line, once it has content, the rest of it cannot change the answer:
            # a one-line document is scanned for newlines only, with no copy of its pieces.
            if (first_ended or not in_content) and _CONTENT.search(chunk, start, len(chunk) if end < 0 else end):
                if first_ended:
                    return True
                in_content = True
            if end < 0:
                break
            first_ended = first_ended or in_content
            start = end + 1
    return False


def iter_json_lines(
    path: str | Path, trace_file: TraceFile, on_read: Callable[[int], None] | None = None
) -> Iterator[list[SpanRecord]]:
    """The records of a JSON Lines file, a line at a time, read as ``read_trace_file`` reads it whole.

    Only one line is held at a time. What cannot be read goes to ``trace_file.problems``, worded
    as ``read_trace_file`` words it; ``trace_file.records`` stays empty. ``on_read`` is told the
    bytes read, a line at a time.
    """
    trace_file.format = OTLP_JSON_LINES
    pending: tuple[int, bytes] | None = None  # a broken line: truncated if nothing follows it
    with open(path, "rb") as stream:
        for number, line in enumerate(stream, start=1):
            if on_read is not None:
                on_read(len(line))
            if number == 1 and line.startswith(codecs.BOM_UTF8):
                line = line[len(codecs.BOM_UTF8) :]
            line = line.rstrip(b"\n")
            if not line.strip():
                continue
            if pending is not None:
                _line_records(trace_file, *pending, None, _BROKEN, False)
                pending = None
            records, document = _decode_line(line)
            if document is _BROKEN:
                pending = (number, line)
                continue
            yield _line_records(trace_file, number, line, records, document, False)
    if pending is not None:
        _line_records(trace_file, *pending, None, _BROKEN, True)


_BROKEN = object()


def _is_otlp(document: Any) -> bool:
    return isinstance(document, dict) and not _OTLP_KEYS.isdisjoint(document)


def read_trace_file(path: str | Path) -> TraceFile:
    """Read one trace file (``-`` reads standard input). Never raises for bad contents."""
    data = trace_file_bytes(path)
    return data if isinstance(data, TraceFile) else parse_trace_bytes(data, str(path))


def clean_otlp_file(path: str, records: list[SpanRecord]) -> TraceFile:
    """What ``parse_trace_bytes`` makes of an OTLP JSON document whose every span became one of ``records``."""
    return _check_not_empty(TraceFile(path=path, format=OTLP_JSON, records=records))


def trace_file_bytes(path: str | Path) -> bytes | TraceFile:
    """The contents of a trace file (``-``: standard input), or the file with the problem that
    kept it from being read."""
    name = str(path)
    try:
        return sys.stdin.buffer.read() if name == "-" else Path(path).read_bytes()
    except OSError as exc:
        return TraceFile(path=name, format=None, problems=[cannot_read(name, exc)])


def cannot_read(path: str, exc: OSError) -> str:
    """The problem of a file that could not be read; a broken symbolic link says where it points,
    which "No such file or directory" about a file the user can see listed would not."""
    if path != "-" and os.path.islink(path):
        with contextlib.suppress(OSError):
            return f"cannot read: broken symbolic link to {os.readlink(path)} ({exc.strerror or exc})"
    return f"cannot read: {exc.strerror or exc}"


def _check_not_empty(trace_file: TraceFile) -> TraceFile:
    if trace_file.format is not None and not trace_file.records and not trace_file.problems:
        trace_file.problems.append("contains no spans")
    return trace_file


def read_trace_document(document: Any, name: str) -> TraceFile:
    """Read span records from a trace document already decoded (what a trace store answered).

    ``name`` says where the document came from, as a path does for a file. The formats and
    error lines are those of :func:`parse_trace_bytes`. Never raises for bad contents.
    """
    trace_file = TraceFile(path=name, format=None)
    try:
        if is_jaeger_document(document):
            trace_file.format = JAEGER_JSON
        elif isinstance(document, dict) and "resourceSpans" in document:
            trace_file.format = OTLP_JSON
        else:
            trace_file.problems.append(_not_traces(document))
            return trace_file
        _records_from_document(document, trace_file)
    except RecursionError:
        trace_file.problems.append("JSON nested too deeply to read")
    except Exception as exc:
        # Not the guard: our bug becomes the document's problem line, which names the exception.
        _READER_BUGS.report("read_trace_document", name)
        trace_file.problems.append(f"could not be read: internal error ({type(exc).__name__}: {exc}); please report it")
    return _check_not_empty(trace_file)
