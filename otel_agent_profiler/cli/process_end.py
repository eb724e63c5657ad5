"""What an offline command made, held until its process ends.

``console_main`` ends the commands that read, analyse and write once without freeing what they
made (see there). Their frames still end before it does, and each frame that held the profiles
freed them as it ended: a tenth of a second and more for 200,000 spans, in a command that takes
three. A command hands its results here before its frames end; they are then freed with the
process. Outside ``console_main`` (tests, a program calling ``main``), nothing is held.
"""

from __future__ import annotations

_held: list[object] | None = None


def hold_until_exit() -> None:
    """From now on, ``keep`` holds what it is given until the process ends (``console_main`` only)."""
    global _held
    if _held is None:
        _held = []


def keep(value: object) -> None:
    """Hold ``value`` until the process ends, if ``hold_until_exit`` was called; else do nothing."""
    if _held is not None:
        _held.append(value)
