"""Prompt-prefix caching candidates, from captured prompt content only."""

from __future__ import annotations

import json
from pathlib import Path

from otel_agent_profiler.analytics import prefix_cache_candidates
from otel_agent_profiler.cli import main
from otel_agent_profiler.core import profile_records
from tests.support.paths import ROOT
from tests.support.span_builders import span

SYSTEM = "You are a careful assistant. " * 200  # 5,800 characters: about 1,450 tokens


def _messages(system: str, question: str) -> str:
    return json.dumps([{"role": "system", "content": system}, {"role": "user", "content": question}])


def _chat(name: str, start: int, model: str, prompt: str | None, cached: int = 0) -> object:
    attributes: dict[str, object] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": 1500,
        "gen_ai.usage.cache_read.input_tokens": cached,
    }
    if prompt is not None:
        attributes["gen_ai.input.messages"] = prompt
    return span(name, "root", start, start + 10, attributes=attributes)


def _profiles():  # type: ignore[no-untyped-def]
    records = [
        span("root", None, 0, 100),
        _chat("a1", 0, "gpt-4o", _messages(SYSTEM, "first question")),
        _chat("a2", 10, "gpt-4o", _messages(SYSTEM, "second question"), cached=1024),
        _chat("a3", 20, "gpt-4o", _messages(SYSTEM, "third question"), cached=1024),
        _chat("a4", 30, "gpt-4o", _messages("A short, different system prompt.", "hi")),
        _chat("b1", 40, "gpt-4o-mini", _messages(SYSTEM, "alone on its model")),
        _chat("c1", 50, "gpt-4o", None),  # no content captured: ignored
    ]
    return profile_records(records)  # type: ignore[arg-type]


def test_shared_prefix_of_one_model_is_a_candidate() -> None:
    (candidate,) = prefix_cache_candidates(_profiles())
    assert candidate.model == "gpt-4o" and candidate.calls == 3
    expected_prefix = len(_messages(SYSTEM, "first question").split("first")[0])
    assert candidate.prefix_chars == expected_prefix
    assert candidate.repeated_tokens == (expected_prefix // 4) * 2
    assert candidate.cached_tokens == 2048
    assert candidate.uncached_repeated_tokens == candidate.repeated_tokens - 2048
    assert len(candidate.span_ids) == 3 and candidate.preview.startswith('[{"role": "system"')


def test_nothing_without_captured_content_or_below_the_threshold() -> None:
    assert prefix_cache_candidates(_profiles(), min_prefix_tokens=100_000) == []
    records = [span("root", None, 0, 10), _chat("a", 0, "m", None), _chat("b", 5, "m", None)]
    assert prefix_cache_candidates(profile_records(records)) == []  # type: ignore[arg-type]


def test_analyze_reports_candidates_only_when_asked(tmp_path: Path) -> None:
    source = ROOT / "examples" / "traces" / "research-agent.otlp.json"
    out = tmp_path / "profile.json"
    assert main(["analyze", str(source), "--format", "json", "--output", str(out)]) == 0
    assert "prefix_cache_candidates" not in json.loads(out.read_text())
    assert main(["analyze", str(source), "--format", "json", "--prefix-cache", "--output", str(out)]) == 0
    assert isinstance(json.loads(out.read_text())["prefix_cache_candidates"], list)
