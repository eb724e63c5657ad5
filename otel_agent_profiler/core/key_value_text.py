"""``a=b,c=d`` text, the form of ``OTEL_EXPORTER_OTLP_HEADERS`` and of the profiler's own
``pattern=category`` overrides: one splitter, so both read blanks, spaces and errors alike.
"""

from __future__ import annotations


def split_pairs(text: str, expected: str, *, split_at_last_equals: bool = False) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of comma-separated ``key=value`` items, each side stripped.

    Empty items are skipped. ``split_at_last_equals`` splits an item at its last ``=`` rather
    than its first, for keys that may hold one (patterns) but values that may not. Raises
    ``ValueError`` naming ``expected`` (such as ``"key=value pairs"``) for an item without ``=``
    or with an empty key.
    """
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, equals, value = item.rpartition("=") if split_at_last_equals else item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"expected {expected} separated by commas, got {item.strip()!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs
