"""README and the documentation site stay true: their code runs, the site builds without a warning,
and the reference pages are what the code says.

README is the landing page (at most 250 lines, opening with the two commands); docs/ is the site,
built with MkDocs. Every Python block in either runs; every shell block of README, Getting started
and the tutorials runs here, or is named in ``RUN_ELSEWHERE`` with the test that runs what it does.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from demo.fake_llm import FakeOpenAIServer
from tests.support.paths import ROOT

README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
MAX_README_LINES = 250
BIN = Path(sys.executable).parent


def _page(relative: str) -> str:
    return (DOCS / relative).read_text(encoding="utf-8")


def _blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


PYTHON_BLOCKS = [
    pytest.param(block, id=f"{_name(path)}-python-{index}")
    for path in (README_PATH, *PAGES)
    for index, block in enumerate(_blocks(path, "python"))
]


@pytest.mark.parametrize("block", PYTHON_BLOCKS)
def test_python_blocks_run(block: str, tmp_path: Path) -> None:
    # Each block runs in a fresh interpreter, as a reader would run it: OpenTelemetry's global
    # providers can be set only once per process; from the checkout's root, where its paths lead.
    script = tmp_path / "docs_block.py"
    script.write_text(block, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_and_the_pages_have_python_examples() -> None:
    assert _blocks(README_PATH, "python")
    assert sum(len(_blocks(path, "python")) for path in PAGES) >= 3


# --------------------------------------------------------------------------------------------------------------
# README as a landing page


def test_readme_is_a_landing_page_of_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES


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


def test_readme_shows_a_picture_of_a_report_that_is_in_the_checkout() -> None:
    pictures = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", README)
    assert pictures
    for picture in pictures:
        path = ROOT / picture
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture


def test_readme_links_lead_to_pages_of_the_site() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README)
    assert len(links) >= 15
    for link in links:
        assert (ROOT / link).is_file(), link
    # Every page of the site is reachable from README's "Read on".
    assert {str(page.relative_to(ROOT)) for page in PAGES} - {"docs/index.md"} <= set(links)


def test_readme_says_the_package_is_not_on_pypi_yet() -> None:
    install = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install ." in install and ".whl" in install
    assert "pip install otel-agent-profiler" in install
    assert "Once it is published (not yet)" in install


# --------------------------------------------------------------------------------------------------------------
# Every shell command of README, Getting started and the tutorials runs

#: Blocks (by their first command) that cannot run inside the test suite, and the test that runs what they do.
RUN_ELSEWHERE = {
    # The test command itself; scripts/demo runs `python -m demo` once .venv is installed, as test_demo.py does.
    "scripts/demo": "tests/project/test_demo.py",
    "scripts/demo --time-scale 0.1": "tests/project/test_demo.py",
    # Installing into the running environment would change it under the tests: a fresh one below.
    "python3 -m pip install .": "tests/project/test_docs.py::test_readme_install_block_runs_in_a_fresh_environment",
    # Jaeger and the collector without Docker, the demo exporting to them and the tag search, as README
    # shows them (on free ports).
    "scripts/jaeger": "tests/backends/test_jaeger_script.py",
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 scripts/demo": "tests/backends/test_jaeger_script.py",
    # Docker is not available here: the Jaeger path (the demo, otelcol-jaeger.yaml as shipped, Jaeger,
    # the tag search) runs with the real programs built from Go, and analyze --jaeger against them.
    "cd collector-config": "tests/backends/test_jaeger_path.py",
    "otel-agent-profiler analyze --jaeger http://localhost:16686 --service research-agent-demo --since 1h": (
        "tests/backends/test_analyze_from_jaeger.py"
    ),
    # serve on fixed ports by hand: run.py does the same on free ports, and test_examples.py runs it.
    "otel-agent-profiler serve --quiet-period 1 &": "tests/project/test_serve_benchmark_and_example.py",
}
RUNNABLE_PAGES = [README_PATH, DOCS / "getting-started.md", *sorted((DOCS / "tutorials").glob("*.md"))]


def _commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


SHELL_BLOCKS = [
    pytest.param(path, block, id=f"{_name(path)}-sh-{index}")
    for path in RUNNABLE_PAGES
    for index, block in enumerate(_blocks(path, "sh"))
]


def test_every_block_run_elsewhere_names_a_test_that_exists() -> None:
    firsts = {_commands(block)[0] for path in RUNNABLE_PAGES for block in _blocks(path, "sh")}
    for command, test in RUN_ELSEWHERE.items():
        assert command in firsts, f"RUN_ELSEWHERE names {command!r}, which no page shows any more"
        path, _, function = test.partition("::")
        assert (ROOT / path).is_file(), test
        assert not function or f"def {function}(" in (ROOT / path).read_text(encoding="utf-8"), test


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(time_scale=0.05) as server:
        yield server


@pytest.mark.e2e
@pytest.mark.parametrize(("page", "block"), SHELL_BLOCKS)
def test_shell_blocks_run(page: Path, block: str, tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    commands = _commands(block)
    if commands[0] in RUN_ELSEWHERE:
        return
    # A reader's shell in a fresh folder beside the checkout's examples: this package's commands on
    # PATH, an OpenAI-compatible server where the examples look for one, nothing exported by default
    # (the blocks that export say where to).
    for name in ("examples", "demo"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env |= {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "OPENAI_BASE_URL": openai_server.base_url,
        "OPENAI_API_KEY": "demo",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{page.name}:\n{script}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    # What the block says it makes is there.
    for command in commands:
        words = shlex.split(command)
        for flag in ("--html", "--output", "--save"):
            if flag in words:
                made = tmp_path / words[words.index(flag) + 1]
                assert made.is_file() and made.stat().st_size > 0, f"{command}: no {made.name}"


@pytest.mark.e2e
def test_readme_install_block_runs_in_a_fresh_environment(tmp_path: Path) -> None:
    # README's install commands as written, in a new virtual environment (its python3 first on PATH)
    # and a folder holding what the wheel is built from, so that neither the tests' environment nor
    # the checkout is touched.
    (block,) = [block for block in _blocks(README_PATH, "sh") if _commands(block)[0] == "python3 -m pip install ."]
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "otel_agent_profiler", checkout / "otel_agent_profiler")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    script = "set -euo pipefail\n" + "\n".join(_commands(block)) + "\n"
    result = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    version = subprocess.run(
        [str(venv / "bin" / "otel-agent-profiler"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.stdout.startswith("otel-agent-profiler "), version.stdout + version.stderr


# --------------------------------------------------------------------------------------------------------------
# The site


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    # --strict: a broken link, a missing anchor or a page left out of the navigation fails the build.
    # The site goes to a temporary folder, never into the checkout.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert not (ROOT / "site").exists()


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_up_to_date() -> None:
    assert _generator().out_of_date() == [], "run: python scripts/docs_reference.py"


def test_the_generator_notices_a_page_that_drifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    for page in generator.PARTS:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(_page(page), encoding="utf-8")
    stale = tmp_path / "reference" / "configuration.md"
    stale.write_text(stale.read_text(encoding="utf-8").replace("`1000`", "`999`", 1), encoding="utf-8")
    monkeypatch.setattr(generator, "DOCS", tmp_path)
    assert generator.out_of_date() == ["reference/configuration.md"]


# --------------------------------------------------------------------------------------------------------------
# What the pages list is what the code has


def test_the_offline_page_documents_every_analyze_option() -> None:
    from otel_agent_profiler.cli import _build_parser

    page = _page("offline.md")
    parser = _build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    analyze = subparsers.choices["analyze"]
    for action in analyze._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                assert option in page, f"docs/offline.md does not mention analyze {option}"


def test_the_cli_reference_has_every_option_of_every_command() -> None:
    from otel_agent_profiler.cli import _build_parser

    page = _page("reference/cli.md")
    parser = _build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, command in subparsers.choices.items():
        section = page.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        for action in command._actions:
            for option in action.option_strings:
                if option != "-h" and option != "--help":
                    assert option in section, f"docs/reference/cli.md: {name} {option}"


def _documented(page: str, table_heading: str) -> set[str]:
    section = page.split(table_heading, 1)[1]
    table = section[section.index("\n|") :].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, re.M))


def test_the_attribute_tables_list_exactly_the_span_attributes_the_code_adds() -> None:
    from otel_agent_profiler.live.attributes import ROOT_ATTRIBUTES, SPAN_ATTRIBUTES

    page = _page("reference/attributes.md")
    assert _documented(page, "Every profiled span:") == set(SPAN_ATTRIBUTES)
    assert _documented(page, "carries the trace's totals:") == set(ROOT_ATTRIBUTES)


def test_the_attribute_table_marks_exactly_the_essential_span_attributes_always() -> None:
    from otel_agent_profiler.live.attributes import ESSENTIAL_SPAN_ATTRIBUTES

    section = _page("reference/attributes.md").split("Every profiled span:", 1)[1]
    table = section[section.index("\n|") :].split("\n\n", 1)[0]
    always = set(re.findall(r"^\| `([^`]+)` \|.*\| always \|$", table, re.M))
    assert always == ESSENTIAL_SPAN_ATTRIBUTES


def test_the_metrics_table_lists_exactly_the_metrics_the_code_records() -> None:
    from otel_agent_profiler.live.profile_metrics import METRICS

    section = _page("reference/attributes.md").split("## Metrics", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \| `([^`]+)` \| ([^|]*) \| [^|]+ \|$", section, re.M)
    documented = {name: (kind, unit, tuple(re.findall(r"`([^`]+)`", attrs))) for name, kind, unit, attrs in rows}
    assert documented == METRICS


def test_the_configuration_page_lists_every_environment_variable() -> None:
    from otel_agent_profiler.plugin import environment_variables

    names = {value for key, value in vars(environment_variables).items() if key.startswith("OTEL_")}
    assert names == set(re.findall(r"`(OTEL_AGENT_PROFILER_\w+)`", _page("reference/configuration.md")))


def test_the_findings_page_explains_every_finding_kind() -> None:
    from otel_agent_profiler.core.findings import KINDS

    page = _page("findings.md")
    headings = re.findall(r"^## `(\w+)`", page, re.M)
    assert headings == list(KINDS), "docs/findings.md: one section per kind, in the registry's order"
    for kind in KINDS:
        section = page.split(f"## `{kind}`", 1)[1].split("\n## ", 1)[0]
        assert "Example" in section and "What to do" in section, kind


def test_the_deployment_page_says_which_collector_configuration_is_for_which_case() -> None:
    page = _page("deployment.md")
    for path in sorted((ROOT / "collector-config").glob("*.y*ml")):
        assert f"`{path.name}`" in page, f"docs/deployment.md does not say what {path.name} is for"
