"""Pausing Python's cyclic garbage collector during bulk loads.

Reading a large trace file allocates millions of dicts and lists, none of them garbage;
the collector would still traverse them again and again (several times the parse itself).
Only the offline command line uses this; nothing inside a user's process does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
