"""Profiles as tables: one row per span (``span_table``) or per trace (``trace_table``).

The span table is the standard input of everything in :mod:`otel_agent_profiler.analytics`;
build it once, keep it (``write_table`` writes CSV or Parquet, ``read_table`` reads them back
with the documented dtypes) and slice it with pandas.

Columns of :func:`span_table`, in this order (``SPAN_COLUMNS`` maps each to its dtype):

======================= ======================= ==========================================================
column                  dtype                   meaning
======================= ======================= ==========================================================
trace_id                category                32 hex characters
span_id                 string                  16 hex characters
parent_span_id          string                  the recorded parent; ``<NA>`` for a span recorded without one
                                                (a span whose parent is missing from the data, or was cut out
                                                of a cycle, keeps its recorded parent but is a root: depth 0)
root_span_id            string                  the root of the span's tree (its own id for a root)
depth                   int64                   0 for a root
name                    category                span name
kind                    category                INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
status                  category                UNSET, OK, ERROR
category                category                llm, embedding, tool, agent, retrieval, memory, internal
                                                (in that order; any other category a custom classifier
                                                returns comes after them)
operation               category                the model, tool or agent name; the span name otherwise
model                   category                LLM and embedding spans naming a model; ``NaN`` otherwise
service                 category                resource attribute ``service.name``; ``NaN`` if absent
start                   datetime64[ns, UTC]     when the span started
start_offset_ms         float64                 from the start of its trace (the earliest span start)
duration_ms             float64                 end minus start (an unended span: until its trace's last end)
self_time_ms            float64                 duration minus the time covered by its children
critical_path_ms        float64                 the span's own share of its trace's critical path
on_critical_path        bool
counted                 bool                    False for the outer span of two nested spans of one LLM call,
                                                and for an LLM call that a trace of its own repeats from an
                                                agent's trace (``core.split_traces``): counted there
ended                   bool                    False for a span that never ended
streaming               bool                    streaming LLM call
input_tokens            Int64                   ``<NA>`` when the span records no token usage (only LLM and
output_tokens           Int64                   embedding spans are read); cached input tokens are part of
cached_input_tokens     Int64                   the input tokens
reasoning_tokens        Int64
total_tokens            Int64                   input plus output tokens
time_to_first_token_ms  Float64                 streaming LLM spans; ``<NA>`` otherwise
cost_usd                Float64                 spans whose model has a price (with a price table)
context_window_use      Float64                 LLM spans: input tokens ÷ the model's context window
                                                (0.42 = 42%); ``<NA>`` when unknown
======================= ======================= ==========================================================

Rows are in the order of the profiles given, and within a trace in depth-first order (roots and
children by start time, then span id), so a span's root is the nearest row above it at depth 0.
Categorical columns compare and group like strings; pass ``observed=True`` to ``groupby``.

Columns of :func:`trace_table`: trace_id, start, duration_ms (earliest start to latest end),
critical_path_ms (sum over the trace's roots), span_count, ``<category>_calls`` (counted spans of
each category), the token columns summed over counted spans, and cost_usd (``<NA>`` when no
span has a cost).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..core.analyze import Classifier
from ..core.categories import CATEGORIES, classify
from ..core.context_window import context_window_use
from ..core.pricing import PriceTable
from ..core.profile import SpanProfile, TraceProfile
from ..core.records import SpanKind, StatusCode
from ..core.split_traces import find_split_llm_calls, repeated_span_ids
from ..core.units import NS_PER_MS
from ..offline import load_profiles

#: The span table's columns and their dtypes, in column order.
SPAN_COLUMNS: dict[str, str] = {
    "trace_id": "category",
    "span_id": "string",
    "parent_span_id": "string",
    "root_span_id": "string",
    "depth": "int64",
    "name": "category",
    "kind": "category",
    "status": "category",
    "category": "category",
    "operation": "category",
    "model": "category",
    "service": "category",
    "start": "datetime64[ns, UTC]",
    "start_offset_ms": "float64",
    "duration_ms": "float64",
    "self_time_ms": "float64",
    "critical_path_ms": "float64",
    "on_critical_path": "bool",
    "counted": "bool",
    "ended": "bool",
    "streaming": "bool",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cached_input_tokens": "Int64",
    "reasoning_tokens": "Int64",
    "total_tokens": "Int64",
    "time_to_first_token_ms": "Float64",
    "cost_usd": "Float64",
    "context_window_use": "Float64",
}

#: The trace table's fixed columns and their dtypes (``<category>_calls`` columns, int64, come after span_count).
TRACE_COLUMNS: dict[str, str] = {
    "trace_id": "category",
    "start": "datetime64[ns, UTC]",
    "duration_ms": "float64",
    "critical_path_ms": "float64",
    "span_count": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cached_input_tokens": "int64",
    "reasoning_tokens": "int64",
    "total_tokens": "int64",
    "cost_usd": "Float64",
}

TOKEN_COLUMNS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "total_tokens",
)

_KINDS = tuple(kind.value for kind in SpanKind)
_STATUSES = tuple(status.value for status in StatusCode)

#: The message of the error ``write_table`` raises for Parquet without pyarrow.
PARQUET_EXTRA_HINT = (
    "Parquet needs pyarrow, which is not installed: pip install 'otel-agent-profiler[parquet]' (or pip install pyarrow)"
)

_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".csv.zip")
_PARQUET_SUFFIXES = (".parquet", ".pq")


# ----------------------------------------------------------------------------------------------------------------
# Building the tables


def _categorical(values: Sequence[Any], categories: Sequence[str] | None = None) -> pd.Categorical:
    """A categorical of ``values`` (``None`` is missing); categories sorted unless given."""
    if categories is None:
        return pd.Categorical(values)
    extra = sorted({value for value in values if value is not None} - set(categories))
    return pd.Categorical(values, categories=[*categories, *extra])


def _strings(values: Sequence[str | None]) -> pd.api.extensions.ExtensionArray:
    return pd.array(values, dtype=pd.StringDtype())


def _int64(values: Iterable[int], count: int) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=count)


def _nullable_int(values: list[int], mask: np.ndarray) -> pd.api.extensions.ExtensionArray:
    return pd.arrays.IntegerArray(np.asarray(values, dtype=np.int64), mask.copy())


def _nullable_float(values: list[float | None]) -> pd.api.extensions.ExtensionArray:
    mask = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    data = np.fromiter((0.0 if value is None else value for value in values), dtype=np.float64, count=len(values))
    return pd.arrays.FloatingArray(data, mask)


def _empty_span_table() -> pd.DataFrame:
    columns: dict[str, Any] = {}
    for name, dtype in SPAN_COLUMNS.items():
        if name == "kind":
            columns[name] = pd.Categorical([], categories=list(_KINDS))
        elif name == "status":
            columns[name] = pd.Categorical([], categories=list(_STATUSES))
        elif name == "category":
            columns[name] = pd.Categorical([], categories=list(CATEGORIES))
        elif dtype == "category":
            columns[name] = pd.Categorical([])
        elif dtype == "string":
            columns[name] = _strings([])
        else:
            columns[name] = pd.Series([], dtype=dtype)
    return pd.DataFrame(columns)


_MISSING: Any = object()


def _counted(profiles: list[TraceProfile], spans: list[SpanProfile], n: int) -> np.ndarray:
    counted = np.fromiter((span.counted for span in spans), dtype=bool, count=n)
    repeated = repeated_span_ids(find_split_llm_calls(profiles))
    if repeated:
        # A call split into a trace of its own is counted in its agent's trace only.
        trace_ids = [profile.trace_id for profile in profiles for _ in profile.spans]
        for index, span in enumerate(spans):
            if (trace_ids[index], span.record.span_id) in repeated:
                counted[index] = False
    return counted


def span_table(
    profiles: Iterable[TraceProfile] | TraceProfile, *, columns: Iterable[str] | None = None
) -> pd.DataFrame:
    """One row per span of ``profiles``, with the columns and dtypes of ``SPAN_COLUMNS``.

    ``columns`` picks some of ``SPAN_COLUMNS`` (a name or several, kept in that order): a table
    of a few columns costs a fraction of the time and memory of the whole one. An unknown name
    raises ``ValueError``.

    Built column by column: a pass over the spans per attribute, then numpy arithmetic (for
    about 200,000 spans it takes well under a second). Works on released profiles too
    (``TraceProfile.release``): it needs no parent links.
    """
    if isinstance(profiles, TraceProfile):
        profiles = [profiles]
    names = list(SPAN_COLUMNS) if columns is None else _known_columns(columns)
    spans = _SpanColumns(list(profiles))
    if spans.n == 0:
        return _empty_span_table()[names]
    return pd.DataFrame({name: getattr(spans, name)() for name in names})


def _known_columns(columns: Iterable[str]) -> list[str]:
    wanted = {columns} if isinstance(columns, str) else set(columns)  # one name, not its letters
    unknown = sorted(wanted - SPAN_COLUMNS.keys())
    if unknown:
        raise ValueError(
            f"no span table column {', '.join(map(repr, unknown))}; the columns are {', '.join(SPAN_COLUMNS)}"
        )
    return [name for name in SPAN_COLUMNS if name in wanted]


class _SpanColumns:
    """The span table's columns, one method each (named after its column); what several columns
    read is computed once, on first use, so a table of a few columns pays only for those."""

    def __init__(self, profiles: list[TraceProfile]) -> None:
        self.profiles = profiles
        self.spans: list[SpanProfile] = [span for profile in profiles for span in profile.spans]
        self.n = len(self.spans)

    @cached_property
    def _records(self) -> list[Any]:
        return [span.record for span in self.spans]

    @cached_property
    def _counts(self) -> np.ndarray:
        return np.fromiter((len(profile.spans) for profile in self.profiles), dtype=np.int64, count=len(self.profiles))

    @cached_property
    def _start_ns(self) -> np.ndarray:
        return _int64((span.start_ns for span in self.spans), self.n)

    @cached_property
    def _depth(self) -> np.ndarray:
        return _int64((span.depth for span in self.spans), self.n)

    @cached_property
    def _span_ids(self) -> list[str]:
        return [record.span_id for record in self._records]

    @cached_property
    def _tokens(self) -> list[Any]:
        return [span.tokens for span in self.spans]

    @cached_property
    def _no_tokens(self) -> np.ndarray:
        return np.fromiter((usage is None for usage in self._tokens), dtype=bool, count=self.n)

    def _token_counts(self, field: str) -> list[int]:
        return [0 if usage is None else getattr(usage, field) for usage in self._tokens]

    # Input and output counts are read twice, by their own columns and by the total.
    @cached_property
    def _inputs(self) -> list[int]:
        return self._token_counts("input")

    @cached_property
    def _outputs(self) -> list[int]:
        return self._token_counts("output")

    def trace_id(self) -> Any:
        return pd.Categorical(np.repeat(np.array([p.trace_id for p in self.profiles], dtype=object), self._counts))

    def span_id(self) -> Any:
        return _strings(self._span_ids)

    def parent_span_id(self) -> Any:
        return _strings([record.parent_span_id or None for record in self._records])

    def root_span_id(self) -> Any:
        depth = self._depth
        # Depth-first order: a span's root is the last span at depth 0 at or above it.
        root_index = np.maximum.accumulate(np.where(depth == 0, np.arange(self.n), 0))
        return _strings(np.array(self._span_ids, dtype=object)[root_index].tolist())

    def depth(self) -> Any:
        return self._depth

    def name(self) -> Any:
        return _categorical([record.name for record in self._records])

    def kind(self) -> Any:
        return _categorical([record.kind.value for record in self._records], _KINDS)

    def status(self) -> Any:
        return _categorical([record.status.value for record in self._records], _STATUSES)

    def category(self) -> Any:
        return _categorical([span.category for span in self.spans], CATEGORIES)

    def operation(self) -> Any:
        return _categorical([span.operation for span in self.spans])

    def model(self) -> Any:
        return _categorical([span.model for span in self.spans])

    def service(self) -> Any:
        # Resources are usually shared by all the records of a process: look each one up once.
        services: list[str | None] = []
        seen: dict[int, str | None] = {}
        for record in self._records:
            resource = record.resource
            key = id(resource)
            service: Any = seen.get(key, _MISSING)
            if service is _MISSING:
                value = resource.get("service.name") if resource else None
                service = seen[key] = value if isinstance(value, str) else None
            services.append(service)
        return _categorical(services)

    def start(self) -> Any:
        return pd.DatetimeIndex(self._start_ns.view("datetime64[ns]")).tz_localize("UTC")

    def start_offset_ms(self) -> Any:
        starts = np.fromiter((p.start_ns for p in self.profiles), dtype=np.int64, count=len(self.profiles))
        return (self._start_ns - np.repeat(starts, self._counts)) / NS_PER_MS

    def duration_ms(self) -> Any:
        return (_int64((span.end_ns for span in self.spans), self.n) - self._start_ns) / NS_PER_MS

    def self_time_ms(self) -> Any:
        return _int64((span.self_time_ns for span in self.spans), self.n) / NS_PER_MS

    def critical_path_ms(self) -> Any:
        return _int64((span.critical_path_ns for span in self.spans), self.n) / NS_PER_MS

    def on_critical_path(self) -> Any:
        return np.fromiter((span.on_critical_path for span in self.spans), dtype=bool, count=self.n)

    def counted(self) -> Any:
        return _counted(self.profiles, self.spans, self.n)

    def ended(self) -> Any:
        return np.fromiter((span.ended for span in self.spans), dtype=bool, count=self.n)

    def streaming(self) -> Any:
        return np.fromiter((span.streaming for span in self.spans), dtype=bool, count=self.n)

    def input_tokens(self) -> Any:
        return _nullable_int(self._inputs, self._no_tokens)

    def output_tokens(self) -> Any:
        return _nullable_int(self._outputs, self._no_tokens)

    def cached_input_tokens(self) -> Any:
        return _nullable_int(self._token_counts("cached_input"), self._no_tokens)

    def reasoning_tokens(self) -> Any:
        return _nullable_int(self._token_counts("reasoning"), self._no_tokens)

    def total_tokens(self) -> Any:
        total = np.asarray(self._inputs, dtype=np.int64) + np.asarray(self._outputs, dtype=np.int64)
        return pd.arrays.IntegerArray(total, self._no_tokens.copy())

    def time_to_first_token_ms(self) -> Any:
        ttft = [span.time_to_first_token_ns for span in self.spans]
        mask = np.fromiter((value is None for value in ttft), dtype=bool, count=self.n)
        values = np.fromiter((0 if value is None else value for value in ttft), dtype=np.int64, count=self.n)
        return pd.arrays.FloatingArray(values / NS_PER_MS, mask)

    def cost_usd(self) -> Any:
        return _nullable_float([span.cost_usd for span in self.spans])

    def context_window_use(self) -> Any:
        return _nullable_float([context_window_use(span) for span in self.spans])


def to_dataframe(
    source: TraceProfile | str | os.PathLike[str] | Iterable[TraceProfile | str | os.PathLike[str]],
    *,
    classifier: Classifier = classify,
    prices: PriceTable | None = None,
    on_problem: Literal["raise", "skip"] = "raise",
) -> pd.DataFrame:
    """The span table of profiles or trace files: the entry point for notebooks.

    ``source`` is a profile, a trace file path (OTLP JSON, OTLP JSON Lines or Jaeger JSON, as
    for ``otel-agent-profiler analyze``), or a list mixing them. Files are read and their spans
    profiled together (with ``classifier`` and ``prices``), so a trace spread over several files
    is put back together. A file that cannot be read, or only partly, raises ``ValueError``
    naming it and what is wrong; with ``on_problem="skip"`` whatever could be read is used.

    >>> table = to_dataframe(["run-1.json", "run-2.jsonl"])            # doctest: +SKIP
    >>> table.groupby("category", observed=True)["self_time_ms"].sum()  # doctest: +SKIP
    """
    if on_problem not in ("raise", "skip"):
        raise ValueError(f"on_problem must be 'raise' or 'skip', got {on_problem!r}")
    if isinstance(source, (TraceProfile, str, os.PathLike)):
        source = [source]
    profiles: list[TraceProfile] = []
    paths: list[str] = []
    for item in source:
        if isinstance(item, TraceProfile):
            profiles.append(item)
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"expected a TraceProfile or a file path, got {type(item).__name__}")
        paths.append(os.fspath(item))
    if paths:
        loaded = load_profiles(paths, classifier=classifier, prices=prices)
        if loaded.error_lines and on_problem == "raise":
            raise ValueError("cannot read every trace file:\n" + "\n".join(loaded.error_lines))
        profiles.extend(loaded.profiles)
    return span_table(profiles)


def trace_table(data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile) -> pd.DataFrame:
    """One row per trace, summed from a span table (or from profiles), in order of first appearance.

    Columns: trace_id (category), start (datetime64[ns, UTC]), duration_ms (earliest start to latest
    end), critical_path_ms, span_count, one ``<category>_calls`` column per category (counted spans),
    input/output/cached_input/reasoning/total tokens (int64, summed over counted spans, 0 without
    usage) and cost_usd (Float64, ``<NA>`` when no span of the trace has a cost).
    """
    table = as_span_table(data)
    codes, trace_ids = pd.factorize(table["trace_id"], sort=False)
    n_traces = len(trace_ids)
    start_ns = start_ns_of(table)
    end_ns = start_ns + duration_ns_of(table)
    first = np.full(n_traces, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n_traces, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, codes, start_ns)
    np.maximum.at(last, codes, end_ns)
    counted = table["counted"].to_numpy(dtype=bool)
    columns: dict[str, Any] = {
        "trace_id": pd.Categorical(np.asarray(trace_ids, dtype=object)),
        "start": pd.DatetimeIndex(first.view("datetime64[ns]")).tz_localize("UTC") if n_traces else _empty_start(),
        "duration_ms": (last - first) / NS_PER_MS,
        "critical_path_ms": sum_by(codes, table["critical_path_ms"].to_numpy(np.float64), n_traces),
        "span_count": np.bincount(codes, minlength=n_traces).astype(np.int64),
    }
    category_codes, category_names = category_codes_of(table)
    for index, category in enumerate(category_names):
        hits = counted & (category_codes == index)
        columns[f"{category}_calls"] = np.bincount(codes[hits], minlength=n_traces).astype(np.int64)
    for column in TOKEN_COLUMNS:
        values = table[column].to_numpy(dtype=np.float64, na_value=0.0)
        columns[column] = sum_by(codes[counted], values[counted], n_traces).round().astype(np.int64)
    cost = table["cost_usd"].to_numpy(dtype=np.float64, na_value=np.nan)
    has_cost = counted & ~np.isnan(cost)
    cost_sum = sum_by(codes[has_cost], cost[has_cost], n_traces)
    any_cost = np.bincount(codes[has_cost], minlength=n_traces) > 0
    columns["cost_usd"] = pd.arrays.FloatingArray(cost_sum, ~any_cost)
    return pd.DataFrame(columns)


def _empty_start() -> pd.DatetimeIndex:
    return pd.DatetimeIndex(np.array([], dtype="datetime64[ns]")).tz_localize("UTC")


# ----------------------------------------------------------------------------------------------------------------
# Helpers shared by the analytics modules


def as_span_table(data: pd.DataFrame | Iterable[TraceProfile] | TraceProfile) -> pd.DataFrame:
    """``data`` if it is already a table, else the span table of the profiles."""
    if isinstance(data, pd.DataFrame):
        missing = [column for column in ("trace_id", "span_id", "start", "duration_ms") if column not in data]
        if missing:
            raise ValueError(f"not a span table: no column {', '.join(missing)}")
        return data
    return span_table(data)


def sum_by(codes: np.ndarray, weights: np.ndarray, length: int) -> np.ndarray:
    """Float64 sums of ``weights`` per code (``np.bincount`` returns int64 for no weights at all)."""
    return np.bincount(codes, weights, length).astype(np.float64, copy=False)


def start_ns_of(table: pd.DataFrame) -> np.ndarray:
    """The ``start`` column as int64 nanoseconds since the epoch (UTC)."""
    start = table["start"]
    if isinstance(start.dtype, pd.DatetimeTZDtype):
        start = start.dt.tz_convert("UTC").dt.tz_localize(None)
    return np.asarray(start.to_numpy(dtype="datetime64[ns]")).view(np.int64)


def duration_ns_of(table: pd.DataFrame) -> np.ndarray:
    """The ``duration_ms`` column back in integer nanoseconds (exact for spans under three weeks)."""
    return np.rint(np.asarray(table["duration_ms"].to_numpy(dtype=np.float64)) * NS_PER_MS).astype(np.int64)


def category_codes_of(table: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Integer codes of the ``category`` column and the names they stand for (CATEGORIES order first)."""
    column = table["category"]
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(dtype=np.int64), [str(c) for c in column.cat.categories]
    values = column.astype(str).to_numpy(dtype=object)
    present = set(values.tolist())
    names = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    lookup = {name: index for index, name in enumerate(names)}
    return np.fromiter((lookup[v] for v in values), dtype=np.int64, count=len(values)), names


# ----------------------------------------------------------------------------------------------------------------
# Files


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for suffix in (*_CSV_SUFFIXES, *_PARQUET_SUFFIXES):
        if name.endswith(suffix):
            return suffix
    return path.suffix.lower()


def _pyarrow_installed() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def _require_pyarrow() -> None:
    if not _pyarrow_installed():
        raise ImportError(PARQUET_EXTRA_HINT)


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a table as CSV (``.csv``, also compressed: ``.csv.gz`` ...) or Parquet (``.parquet``, ``.pq``).

    Parquet keeps every dtype; CSV keeps the values (``read_table`` restores the span table's
    dtypes). Parquet needs pyarrow: without it, ``ImportError`` says which extra to install.
    Returns the path written.
    """
    target = Path(path)
    suffix = _suffix(target)
    if suffix in _PARQUET_SUFFIXES:
        _require_pyarrow()
        df.to_parquet(target, engine="pyarrow", index=False)
    elif suffix in _CSV_SUFFIXES:
        df.to_csv(target, index=False)
    else:
        raise ValueError(
            f"{target}: unknown table format {suffix or '(no suffix)'!r}; use .csv (or .csv.gz) or .parquet"
        )
    return target


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a table written by ``write_table``; span-table columns get their documented dtypes back."""
    source = Path(path)
    suffix = _suffix(source)
    if suffix in _PARQUET_SUFFIXES:
        _require_pyarrow()
        df = pd.read_parquet(source, engine="pyarrow")
    elif suffix in _CSV_SUFFIXES:
        # Only an empty field is missing: a span may well be named "NA" or "null".
        df = pd.read_csv(source, keep_default_na=False, na_values=[""], dtype=str)
    else:
        raise ValueError(f"{source}: unknown table format {suffix or '(no suffix)'!r}; use .csv or .parquet")
    return _restore_dtypes(df)


def _restore_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    known = SPAN_COLUMNS if "span_id" in df.columns else TRACE_COLUMNS if "span_count" in df.columns else {}
    columns: dict[str, Any] = {}
    for name in df.columns:
        column = df[name]
        dtype = known.get(str(name))
        if dtype == "datetime64[ns, UTC]":
            column = pd.to_datetime(column, utc=True, format="ISO8601").dt.as_unit("ns")
        elif dtype == "category" and not isinstance(column.dtype, pd.CategoricalDtype):
            fixed = {"kind": _KINDS, "status": _STATUSES, "category": CATEGORIES}.get(str(name))
            values = [None if pd.isna(v) else str(v) for v in column.tolist()]
            column = pd.Series(_categorical(values, fixed), index=df.index)
        elif dtype == "string":
            column = column.astype(pd.StringDtype())
        elif dtype == "bool" and column.dtype != bool:
            column = column.map({"True": True, "False": False, True: True, False: False}).astype(bool)
        elif dtype in ("int64", "float64", "Int64", "Float64") and column.dtype != dtype:
            column = pd.to_numeric(column).astype(dtype)
        elif dtype is None and _is_text(column):
            column = _guess_dtype(column)
        columns[str(name)] = column
    return pd.DataFrame(columns, index=df.index)


def _is_text(column: pd.Series) -> bool:
    return bool(pd.api.types.is_string_dtype(column.dtype) or column.dtype == object)


def _guess_dtype(column: pd.Series) -> pd.Series:
    """A CSV column of another table (``trace_table``, statistics): booleans and numbers back as such."""
    present = column.dropna()
    if len(present) and present.isin(["True", "False"]).all():
        return column.map({"True": True, "False": False}).astype("boolean" if column.isna().any() else bool)
    try:
        numbers = pd.to_numeric(column)
    except (ValueError, TypeError):
        return column
    if pd.api.types.is_float_dtype(numbers.dtype) and numbers.isna().any():
        whole = numbers.dropna()
        if len(whole) and (whole == np.floor(whole)).all() and not present.str.contains(".", regex=False).any():
            return numbers.astype("Int64")
        return numbers.astype("Float64")
    return numbers
