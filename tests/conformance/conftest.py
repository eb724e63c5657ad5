"""Known gaps of a source (``Source.known_gaps``) mark its tests as expected failures, with the reason."""

from __future__ import annotations

import pytest

from tests.conformance.harness import Source


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        source = callspec.params.get("source") if callspec is not None else None
        if not isinstance(source, Source):
            continue
        name = getattr(item, "originalname", item.name)
        for key in (name, f"{name}[{callspec.params.get('mode')}]"):
            if key in source.known_gaps:
                strict, reason = source.known_gaps[key]
                item.add_marker(pytest.mark.xfail(reason=reason, strict=strict))
