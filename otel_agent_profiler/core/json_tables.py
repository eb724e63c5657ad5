"""Tables by model name given as JSON text or a JSON file: the format of ``--prices`` and ``--context-windows``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def json_table(value: str | Path, what: str, entries: str) -> Mapping[str, object]:
    """The JSON object in ``value``: JSON text (starting with ``{``) or the path of a JSON file.

    ``what`` names the table in errors ("price table"), ``entries`` what it maps model names to
    ("prices"). Raises ``ValueError`` saying what is wrong: an unreadable file, bad JSON, not an object.
    """
    text = str(value).strip()
    if not text.startswith("{"):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise ValueError(f"cannot read {what} {str(value)!r}: {reason}") from None
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{what} must be a JSON object mapping model names to {entries}")
    return raw
