"""TraceProfile.release: the tree is unlinked so profiles are freed without the garbage collector."""

from __future__ import annotations

import gc

from otel_agent_profiler.core import SpanProfile, profile_records
from tests.support.span_builders import span


def _profile():  # type: ignore[no-untyped-def]
    records = [
        span("root", None, 0, 100, **{"gen_ai.operation.name": "invoke_agent"}),
        span("chat", "root", 0, 60, **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}),
        span("tool", "root", 60, 100, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}),
    ]
    (profile,) = profile_records(records)
    return profile


def test_release_unlinks_the_tree_and_keeps_the_totals() -> None:
    profile = _profile()
    before = (profile.critical_path_ns, profile.categories["llm"].critical_path_ns, profile.span_count)
    roots = list(profile.roots)
    profile.release()
    assert all(s.parent is None and s.children == [] for s in profile.spans)
    assert (profile.critical_path_ns, profile.categories["llm"].critical_path_ns, profile.span_count) == before
    assert profile.roots == roots


def _span_profiles_left_for_the_collector(release: bool) -> int:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable lands in gc.garbage
    try:
        profile = _profile()
        if release:
            profile.release()
        del profile
        gc.collect()
        return sum(isinstance(obj, SpanProfile) for obj in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_released_profile_is_freed_by_reference_counting_alone() -> None:
    assert _span_profiles_left_for_the_collector(release=True) == 0
    # Without release, parents and children keep each other alive until a collection.
    assert _span_profiles_left_for_the_collector(release=False) == 3
