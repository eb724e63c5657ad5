"""cli/process_end.py: what a command made is held to the end of the process only under console_main."""

from __future__ import annotations

import gc
import weakref

import pytest

from otel_agent_profiler.cli import process_end


class _Made:
    """Something a command made (weakly referenceable, unlike a list)."""


def test_nothing_is_held_unless_the_process_is_to_end_without_freeing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_end, "_held", None)
    made = _Made()
    alive = weakref.ref(made)
    process_end.keep(made)
    del made
    gc.collect()
    assert alive() is None, "held outside console_main: a program calling main() would leak it"


def test_after_hold_until_exit_what_is_kept_outlives_its_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_end, "_held", None)
    process_end.hold_until_exit()

    def command() -> weakref.ref[_Made]:
        made = _Made()
        process_end.keep(made)
        return weakref.ref(made)

    alive = command()
    gc.collect()
    assert alive() is not None
