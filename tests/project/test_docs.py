"""README stays true: its code runs, and it opens with the two commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"python-block-{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_blocks_run(block: str, tmp_path: Path) -> None:
    # Each block runs in a fresh interpreter, as a reader would run it: OpenTelemetry's global
    # providers can be set only once per process; from the checkout's root, where its paths lead.
    script = tmp_path / "readme_block.py"
    script.write_text(block, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_has_python_examples() -> None:
    assert PYTHON_BLOCKS


def test_readme_opens_with_the_demo_and_test_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["scripts/demo", "scripts/test"]
    for command in commands:
        script = ROOT / command
        assert script.is_file() and script.stat().st_mode & 0o111, f"{command} must be an executable script"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec scripts/test\n" in ci


def test_readme_documents_every_analyze_option() -> None:
    from otel_agent_profiler.cli import _build_parser

    parser = _build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    analyze = subparsers.choices["analyze"]
    for action in analyze._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                assert option in README, f"README does not mention analyze {option}"


def _documented(table_heading: str) -> set[str]:
    section = README.split(table_heading, 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def _expand(names: set[str]) -> set[str]:
    from otel_agent_profiler.core.categories import CATEGORIES
    from otel_agent_profiler.live.attributes import TOKEN_TYPES

    expanded = set()
    for name in names:
        if "<category>" in name:
            expanded |= {name.replace("<category>", category) for category in CATEGORIES}
        elif "<type>" in name:
            expanded |= {name.replace("<type>", kind) for kind in TOKEN_TYPES}
        else:
            expanded.add(name)
    return expanded


def test_readme_lists_exactly_the_span_attributes_the_code_adds() -> None:
    from otel_agent_profiler.live.attributes import ROOT_ATTRIBUTES, SPAN_ATTRIBUTES

    assert _expand(_documented("Every profiled span:")) == set(SPAN_ATTRIBUTES)
    assert _expand(_documented("carries the trace's totals:")) == set(ROOT_ATTRIBUTES)


def test_readme_marks_exactly_the_essential_span_attributes_always() -> None:
    from otel_agent_profiler.live.attributes import ESSENTIAL_SPAN_ATTRIBUTES

    section = README.split("Every profiled span:", 1)[1].split("\n\n", 2)[1]
    always = set(re.findall(r"^\| `([^`]+)` \|.*\| always \|$", section, re.M))
    assert always == ESSENTIAL_SPAN_ATTRIBUTES


def test_readme_lists_exactly_the_metrics_the_code_records() -> None:
    from otel_agent_profiler.live.profile_metrics import METRICS

    section = README.split("### Metrics", 1)[1].split("### Configuration", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \| `([^`]+)` \| (.*) \|$", section, re.M)
    documented = {name: (kind, unit, tuple(re.findall(r"`([^`]+)`", attrs))) for name, kind, unit, attrs in rows}
    assert documented == METRICS


def test_readme_lists_every_environment_variable() -> None:
    from otel_agent_profiler.plugin import environment_variables

    names = {value for key, value in vars(environment_variables).items() if key.startswith("OTEL_")}
    section = README.split("### Configuration", 1)[1].split("\n## ", 1)[0]
    assert names == set(re.findall(r"`(OTEL_AGENT_PROFILER_\w+)`", section))
