"""Context-window use per LLM call: in the JSON, the span table and (via expected_attributes) span attributes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_agent_profiler.analytics import to_dataframe
from otel_agent_profiler.cli import main
from tests.cli.test_cli_cost import _llm_trace


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o-mini", 0.5), ("gpt-4o-mini-2024-07-18", 0.5), ("claude-sonnet-4", 0.32), ("unknown-model", None)],
)
def test_json_and_span_table_have_the_share_of_the_window_each_llm_call_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, expected: float | None
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_llm_trace(model, input_tokens=64_000)), encoding="utf-8")
    assert main(["analyze", "--format", "json", str(path)]) == 0
    spans = json.loads(capsys.readouterr().out)["traces"][0]["spans"]
    assert [span["context_window_use"] for span in spans] == [None, expected]
    column = to_dataframe(path)["context_window_use"]
    assert str(column.dtype) == "Float64"
    assert column.isna().tolist() == [True, expected is None]
    if expected is not None:
        assert column.iloc[1] == pytest.approx(expected)
