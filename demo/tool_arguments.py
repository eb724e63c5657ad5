"""Tool-call arguments the fake LLM server generates from a tool's JSON-schema ``parameters``.

``_tool_arguments`` fills in the required properties (all of them when none are listed) the way a model
would: enums pick a member, ``$ref``/``anyOf``/``oneOf``/``allOf`` are followed, strings look like their
property name (a city, a URL, a query made of the user's words), numbers respect the schema's bounds. Schemas
come from clients, so odd ones yield what can be made of them, never an error.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from .plausible_text import _CITIES, _NAMES, _VOCABULARY


def _resolve_ref(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _string_value(name: str, schema: Mapping[str, Any], rng: random.Random, topic: list[str]) -> str:
    key = name.lower()
    fmt = schema.get("format")
    if fmt == "date":
        return "2024-07-18"
    if fmt == "date-time":
        return "2024-07-18T09:30:00Z"
    if fmt in ("uri", "url") or "url" in key or "link" in key:
        return f"https://example.com/{rng.choice(_VOCABULARY)}"
    if fmt == "email" or "email" in key:
        return "ada@example.com"
    if any(word in key for word in ("city", "location", "place", "destination")):
        return rng.choice(_CITIES)
    if any(word in key for word in ("query", "question", "topic", "search", "prompt", "keyword", "text")) or key in (
        "q",
        "input",
    ):
        return " ".join(topic) if topic else " ".join(rng.choices(_VOCABULARY, k=3))
    if "name" in key or "author" in key:
        return rng.choice(_NAMES)
    if "path" in key or "file" in key:
        return f"notes/{rng.choice(_VOCABULARY)}.md"
    if key.endswith("id"):
        return f"id_{rng.getrandbits(32):08x}"
    if "lang" in key:
        return "en"
    if "unit" in key:
        return "celsius"
    return " ".join(rng.choices(_VOCABULARY, k=rng.randint(1, 3)))


def _number(value: Any, default: float) -> float:
    """A schema bound, or ``default`` when the schema gives none or nonsense (schemas come from clients)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return float(default)


def _schema_value(
    name: str, schema: Any, root: Mapping[str, Any], rng: random.Random, topic: list[str], depth: int = 0
) -> Any:
    """A plausible value for ``schema``: enums pick a member, strings look like their property name."""
    if not isinstance(schema, Mapping) or depth > 6:
        return None
    schema = _resolve_ref(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            non_null = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            return _schema_value(name, (non_null or options)[0], root, rng, topic, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "string":
        return _string_value(name, schema, rng, topic)
    if kind == "integer":
        low = int(_number(schema.get("minimum"), 1))
        high = max(low, int(_number(schema.get("maximum"), max(low, 10))))
        if any(word in name.lower() for word in ("limit", "count", "top", "max", "num")):
            return min(max(5, low), high)
        return rng.randint(low, high)
    if kind == "number":
        low_f = _number(schema.get("minimum"), 0.0)
        high_f = max(low_f, _number(schema.get("maximum"), low_f + 100))
        return round(rng.uniform(low_f, high_f), 2)
    if kind == "boolean":
        return True
    if kind == "array":
        count = min(max(1, int(_number(schema.get("minItems"), 1))), 5)
        return [_schema_value(name, schema.get("items", {}), root, rng, topic, depth + 1) for _ in range(count)]
    if kind == "object":
        return _object_value(schema, root, rng, topic, depth + 1)
    return None


def _object_value(
    schema: Mapping[str, Any], root: Mapping[str, Any], rng: random.Random, topic: list[str], depth: int = 0
) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    required = schema.get("required")
    # Models mostly fill in what is required and leave optional parameters out.
    names = [n for n in properties if n in required] if isinstance(required, list) else list(properties)
    return {n: _schema_value(n, properties[n], root, rng, topic, depth) for n in names}


def _tool_arguments(parameters: Any, rng: random.Random, topic: list[str] | None = None) -> dict[str, Any]:
    """Arguments for a tool with JSON-schema ``parameters``, as a model would write them."""
    if not isinstance(parameters, Mapping):
        return {}
    try:
        return _object_value(parameters, parameters, rng, topic or [])
    except (TypeError, ValueError, RecursionError):
        # A schema too odd to follow still gets a call; a real model would improvise too.
        return {}
