"""The offline commands' output, byte for byte, against checked-in golden files.

A guard for work on how the output is built and encoded (msgspec structs, formatting, worker
processes): the bytes of ``analyze --format json`` (with and without findings), the text report,
``report --summary-json``, ``report --html`` and ``diff`` (text and JSON) must not change unless
a change means them to. The inputs are the example traces and small exports made by the
benchmark's generator (benchmarks/agent_traces.py): a lean one and one with prompt and completion
content.

After a deliberate change to what a command writes, regenerate the golden files and read the diff:

    UPDATE_GOLDEN=1 pytest tests/offline/test_golden_outputs.py

``UPDATE_GOLDEN=txt,html`` regenerates only those kinds (``KINDS``: the golden files' suffixes before
``.golden``), leaving the others as guards: after a change to the text report's wording, say.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from tests.support.paths import DATA, EXAMPLES

GOLDEN = DATA / "golden" / "outputs"

#: What the lean export keeps: what the profile reads (as benchmarks/bench_cli.py's lean export).
_LEAN_ATTRIBUTES = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.tool.name",
        "gen_ai.agent.name",
        "gen_ai.data_source.id",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "db.system",
    }
)


def _lean_runs(runs: int, seed: int) -> dict[str, Any]:
    spans = [
        {key: value for key, value in span.items() if key != "events"}
        | {"attributes": [kv for kv in span["attributes"] if kv["key"] in _LEAN_ATTRIBUTES]}
        for run in generate_runs(runs, seed=seed)
        for span in run
    ]
    return otlp_document(spans)


def _content_runs(runs: int, seed: int) -> dict[str, Any]:
    return otlp_document([span for run in generate_runs(runs, seed=seed, content=True) for span in run])


#: The inputs by name: how each is made, and how it is written (compact as the lean benchmark
#: export, or as json.dumps writes it).
INPUTS: dict[str, Callable[[], str]] = {
    "research_agent": lambda: (EXAMPLES / "traces" / "research-agent.otlp.json").read_text(encoding="utf-8"),
    "demo": lambda: (DATA / "demo_trace.otlp.json").read_text(encoding="utf-8"),
    "lean": lambda: json.dumps(_lean_runs(12, seed=7), separators=(",", ":")),
    "lean_other": lambda: json.dumps(_lean_runs(12, seed=8), separators=(",", ":")),
    "content": lambda: json.dumps(_content_runs(3, seed=7)),
}


@pytest.fixture(scope="module")
def written_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("inputs")
    for name, text in INPUTS.items():
        (directory / f"{name}.otlp.json").write_text(text(), encoding="utf-8")
    return directory


@pytest.fixture
def inputs(written_inputs: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The inputs by name, as paths relative to the working directory: the outputs name them."""
    monkeypatch.chdir(written_inputs)
    return {name: Path(f"{name}.otlp.json") for name in INPUTS}


#: The kinds of golden file, by what wrote them.
KINDS = ("json", "findings.json", "txt", "summary.json", "html", "diff.txt", "diff.json")


def _updated(kind: str) -> bool:
    """Whether to rewrite the golden files of ``kind``: UPDATE_GOLDEN names it, or is set to
    anything else than a list of kinds (1, as for the other golden files)."""
    update = os.environ.get("UPDATE_GOLDEN", "")
    kinds = update.split(",")
    return bool(update) and (kind in kinds or not set(kinds) <= set(KINDS))


def _check(name: str, kind: str, written: bytes) -> None:
    assert kind in KINDS
    golden = GOLDEN / f"{name}.{kind}.golden"
    if _updated(kind):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(written)
    assert golden.exists(), f"no golden file {golden.name}: regenerate with UPDATE_GOLDEN=1 (see this module)"
    assert written == golden.read_bytes(), f"the {kind} output of {name} changed: see {golden}"


def _run(argv: list[str], written: Path) -> bytes:
    assert main([*argv, "--no-progress"]) in (0, 3), argv  # diff exits 3 on a regression
    return written.read_bytes()


SINGLE = ("research_agent", "demo", "lean", "content")


@pytest.mark.parametrize("name", SINGLE)
def test_analyze_json_is_unchanged(name: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    _check(name, "json", _run(["analyze", str(inputs[name]), "--format", "json", "-o", str(out)], out))
    argv = ["analyze", str(inputs[name]), "--format", "json", "--findings", "-o", str(out)]
    _check(name, "findings.json", _run(argv, out))


@pytest.mark.parametrize("name", SINGLE)
def test_the_text_report_is_unchanged(name: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    _check(name, "txt", _run(["analyze", str(inputs[name]), "-o", str(out)], out))


@pytest.mark.parametrize("name", SINGLE)
def test_report_summary_json_and_html_are_unchanged(name: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    html, summary = tmp_path / "report.html", tmp_path / "summary.json"
    argv = ["report", str(inputs[name]), "--html", str(html), "--summary-json", str(summary)]
    _check(name, "summary.json", _run(argv, summary))
    _check(name, "html", html.read_bytes())


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_diff_is_unchanged(output_format: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "diff.out"
    argv = ["diff", str(inputs["lean"]), str(inputs["lean_other"]), "--format", output_format, "-o", str(out)]
    _check("lean", f"diff.{'txt' if output_format == 'text' else 'json'}", _run(argv, out))


@pytest.mark.parametrize(
    "argv_tail, kind",
    [(["--format", "json"], "json"), (["--format", "json", "--findings"], "findings.json"), ([], "txt")],
)
def test_worker_processes_write_the_same_bytes(
    argv_tail: list[str], kind: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    written = _run(["analyze", str(inputs["lean"]), *argv_tail, "--workers", "2", "-o", str(out)], out)
    assert written == (GOLDEN / f"lean.{kind}.golden").read_bytes(), f"{kind} from two workers differs"
