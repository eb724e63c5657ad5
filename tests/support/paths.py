"""Where things are, for tests: use these instead of computing paths from ``__file__``."""

from __future__ import annotations

from pathlib import Path

#: the repository root
ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: the shared helpers (tests/support/), some of which run as scripts
SUPPORT = TESTS / "support"
#: recorded traces, schemas and golden reports
DATA = TESTS / "data"
#: programs the end-to-end tests run
E2E_APPS = TESTS / "e2e_apps"
BENCHMARKS = ROOT / "benchmarks"
EXAMPLES = ROOT / "examples"
