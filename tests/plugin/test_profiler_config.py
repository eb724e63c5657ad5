"""The profiler's options: argument beats environment variable beats default, for every option.

A bad argument is a programming error (``ValueError``); a bad environment value is logged and
replaced by the default, so a typo in the environment can never stop the application.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import Unpack

from otel_agent_profiler import install
from otel_agent_profiler.core import CATEGORIES, PriceTable, TokenUsage, classify
from otel_agent_profiler.core.context_window import with_built_in_context_windows
from otel_agent_profiler.core.pricing import with_built_in_prices
from otel_agent_profiler.plugin import environment_variables as env
from otel_agent_profiler.plugin.config import (
    _OPTIONS,
    OPTION_NAMES,
    ProfilerConfig,
    ProfilerOptions,
    enabled_in_environment,
    make_classifier,
    resolve_config,
)
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (*[v for v, _ in _OPTIONS.values()], env.OTEL_AGENT_PROFILER_ENABLED):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def processors() -> Iterator[list[AgentProfilerSpanProcessor]]:
    made: list[AgentProfilerSpanProcessor] = []
    yield made
    for processor in made:
        processor.shutdown()


def _prices_of(value: PriceTable | None) -> dict[str, tuple[float, float, float | None]] | None:
    """A comparable view of a price table (PriceTable has no equality)."""
    if value is None:
        return None
    result = {}
    for model in ("gpt-4o", "gpt-4o-mini", "claude"):
        price = value.price_of(model)
        if price is not None:
            result[model] = (price.input, price.output, price.cached_input)
    return result


def _windows_of(value: Any) -> tuple[int | None, ...]:
    """The windows of my-llm, other-llm and gpt-4o (built in): every table given is laid over the built-in one."""
    return tuple(value.get(model) for model in ("my-llm", "other-llm", "gpt-4o"))


def _overrides_of(value: Any) -> Any:
    return tuple(value)


@dataclass(frozen=True)
class OptionCase:
    argument: Any
    from_argument: Any
    env_text: str
    from_env: Any
    default: Any
    bad_argument: Any
    bad_env_text: str
    view: Callable[[Any], Any] = lambda value: value


PRICES_ARG = {"gpt-4o": {"input": 2.0, "output": 8.0, "cached_input": 1.0}}
PRICES_ENV = '{"gpt-4o-mini": {"input": 0.1, "output": 0.5}}'
#: What ``_prices_of`` shows of the built-in table: every option's table is laid over it.
BUILT_IN_GPT_4O = (2.5, 10.0, 1.25)
BUILT_IN_GPT_4O_MINI = (0.15, 0.6, 0.075)
BUILT_IN_VIEW = {"gpt-4o": BUILT_IN_GPT_4O, "gpt-4o-mini": BUILT_IN_GPT_4O_MINI}

#: One row per option in ``config._OPTIONS``.
CASES: dict[str, OptionCase] = {
    "max_traces": OptionCase(5, 5, "7", 7, 1000, 0, "many"),
    "max_spans_per_trace": OptionCase(50, 50, " 70 ", 70, 10_000, -1, "1.5"),
    "trace_timeout_s": OptionCase(0.5, 0.5, "2.5", 2.5, 60.0, 0, "-3"),
    "sample_rate": OptionCase(0.25, 0.25, "0.75", 0.75, 1.0, 1.5, "half"),
    "category_overrides": OptionCase(
        {"fetch_*": "tool"},
        (("fetch_*", "tool"),),
        "*memory*=memory, search_*=retrieval",
        (("*memory*", "memory"), ("search_*", "retrieval")),
        (),
        {"fetch_*": "not-a-category"},
        "fetch_*=bogus",
        _overrides_of,
    ),
    "prices": OptionCase(
        PRICES_ARG,
        {"gpt-4o": (2.0, 8.0, 1.0), "gpt-4o-mini": BUILT_IN_GPT_4O_MINI},
        PRICES_ENV,
        {"gpt-4o": BUILT_IN_GPT_4O, "gpt-4o-mini": (0.1, 0.5, None)},
        with_built_in_prices(None),
        {"gpt-4o": {"input": "cheap", "output": 1}},
        "{not json",
        _prices_of,
    ),
    "context_windows": OptionCase(
        {"my-llm": 32_000},
        (32_000, None, 128_000),
        '{"other-llm": 8000}',
        (None, 8_000, 128_000),
        with_built_in_context_windows(None),
        {"my-llm": 0},
        '{"my-llm": "big"}',
        _windows_of,
    ),
    "metrics_enabled": OptionCase(False, False, "false", False, True, "maybe", "perhaps"),
    "enrich_spans": OptionCase(False, False, "0", False, True, "nope", "2"),
    "span_attributes": OptionCase("all", "all", "ALL", "all", "essential", "every", "some"),
    "console_report": OptionCase(True, True, "yes", True, False, 1, "loud"),
    "max_operations": OptionCase(3, 3, "9", 9, 100, True, "0"),
    "max_buffer_bytes": OptionCase(1_000_000, 1_000_000, "5000000", 5_000_000, 256 * 1024 * 1024, -1, "lots"),
    "shutdown_timeout_s": OptionCase(2.5, 2.5, "10", 10.0, 30.0, float("inf"), "0"),
    # Port 9 (discard) on this machine: nothing answers, so the pollers these cases start only count failures.
    "backend_metrics": OptionCase(
        ["http://127.0.0.1:9/metrics"],
        ("http://127.0.0.1:9/metrics",),
        " http://127.0.0.1:9/a, https://127.0.0.1:9/b ",
        ("http://127.0.0.1:9/a", "https://127.0.0.1:9/b"),
        (),
        ["ftp://vllm/metrics"],
        "vllm:8000",
    ),
    "backend_metrics_interval_s": OptionCase(0.25, 0.25, "0.1", 0.1, 1.0, 0, "often"),
}


def test_the_table_covers_every_option() -> None:
    assert set(CASES) == set(_OPTIONS) == set(OPTION_NAMES)
    assert {field for field in ProfilerConfig.__dataclass_fields__} == set(_OPTIONS)


def test_every_option_has_its_own_environment_variable() -> None:
    variables = [variable for variable, _ in _OPTIONS.values()]
    assert len(set(variables)) == len(variables)
    for variable in variables:
        assert variable.startswith("OTEL_AGENT_PROFILER_")
        assert getattr(env, variable) == variable


@pytest.mark.parametrize("option", sorted(CASES))
def test_default_when_neither_argument_nor_environment(option: str) -> None:
    case = CASES[option]
    assert case.view(getattr(resolve_config(environ={}), option)) == case.view(case.default)
    assert case.view(getattr(ProfilerConfig(), option)) == case.view(case.default)


@pytest.mark.parametrize("option", sorted(CASES))
def test_environment_beats_default(option: str) -> None:
    case = CASES[option]
    variable = _OPTIONS[option][0]
    config = resolve_config(environ={variable: case.env_text})
    assert case.view(getattr(config, option)) == case.from_env


@pytest.mark.parametrize("option", sorted(CASES))
def test_argument_beats_environment(option: str) -> None:
    case = CASES[option]
    variable = _OPTIONS[option][0]
    config = resolve_config(environ={variable: case.env_text}, **{option: case.argument})
    assert case.view(getattr(config, option)) == case.from_argument


@pytest.mark.parametrize("option", sorted(CASES))
def test_real_process_environment_is_read(option: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[option]
    monkeypatch.setenv(_OPTIONS[option][0], case.env_text)
    assert case.view(getattr(resolve_config(), option)) == case.from_env
    assert case.view(getattr(resolve_config(**{option: case.argument}), option)) == case.from_argument


@pytest.mark.parametrize("option", sorted(CASES))
def test_bad_argument_raises_value_error_naming_the_option(option: str) -> None:
    with pytest.raises(ValueError, match=option):
        resolve_config(environ={}, **{option: CASES[option].bad_argument})


@pytest.mark.parametrize("option", sorted(CASES))
def test_bad_environment_value_is_logged_and_the_default_used(option: str, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[option]
    variable = _OPTIONS[option][0]
    with caplog.at_level(logging.WARNING):
        config = resolve_config(environ={variable: case.bad_env_text})
    assert case.view(getattr(config, option)) == case.view(case.default)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and variable in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize("option", sorted(CASES))
def test_bad_environment_value_does_not_hide_a_good_argument(option: str, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[option]
    variable = _OPTIONS[option][0]
    config = resolve_config(environ={variable: case.bad_env_text}, **{option: case.argument})
    assert case.view(getattr(config, option)) == case.from_argument


@pytest.mark.parametrize("option", sorted(CASES))
def test_blank_environment_value_means_default_silently(option: str, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[option]
    with caplog.at_level(logging.WARNING):
        config = resolve_config(environ={_OPTIONS[option][0]: "   "})
    assert case.view(getattr(config, option)) == case.view(case.default)
    assert not caplog.records


@pytest.mark.parametrize("option", sorted(CASES))
def test_processor_takes_every_option_as_a_keyword(
    option: str, processors: list[AgentProfilerSpanProcessor], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[option]
    monkeypatch.setenv(_OPTIONS[option][0], case.env_text)
    processor = AgentProfilerSpanProcessor(**{option: case.argument})
    processors.append(processor)
    assert case.view(getattr(processor.config, option)) == case.from_argument
    from_env = AgentProfilerSpanProcessor()
    processors.append(from_env)
    assert case.view(getattr(from_env.config, option)) == case.from_env


@pytest.mark.parametrize("option", sorted(CASES))
def test_processor_rejects_a_bad_argument(option: str) -> None:
    with pytest.raises(ValueError):
        AgentProfilerSpanProcessor(**{option: CASES[option].bad_argument})


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_trace"):
        resolve_config(max_trace=3)
    with pytest.raises(ValueError):
        AgentProfilerSpanProcessor(sampling=0.5)


def test_the_typed_options_are_the_configs_fields() -> None:
    # ProfilerOptions is what a type checker holds install()'s and the processor's keywords to;
    # an option added to (or renamed in) ProfilerConfig must be added there too, or this fails.
    fields = {field.name for field in dataclasses.fields(ProfilerConfig)}
    assert set(typing.get_type_hints(ProfilerOptions)) == fields == OPTION_NAMES
    assert ProfilerOptions.__required_keys__ == frozenset()
    for constructor in (AgentProfilerSpanProcessor.__init__, install):
        assert typing.get_type_hints(constructor)["options"] == Unpack[ProfilerOptions], constructor


def test_an_unknown_option_still_fails_at_run_time_with_its_name() -> None:
    # The types catch it in a checked program; an unchecked one gets the same ValueError as ever.
    unknown: dict[str, Any] = {"sampling": 0.5, "max_trace": 3}
    with pytest.raises(ValueError, match=r"^unknown profiler option\(s\): max_trace, sampling$"):
        AgentProfilerSpanProcessor(**unknown)


def test_none_argument_means_not_given() -> None:
    config = resolve_config(environ={env.OTEL_AGENT_PROFILER_MAX_TRACES: "12"}, max_traces=None)
    assert config.max_traces == 12


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("sample_rate", 0, 0.0),
        ("sample_rate", 1, 1.0),
        ("sample_rate", "0", 0.0),
        ("max_traces", 3.0, 3),
        ("max_traces", "1", 1),
        ("trace_timeout_s", "0.01", 0.01),
        ("metrics_enabled", "TRUE", True),
        ("metrics_enabled", "off", False),
        ("enrich_spans", " On ", True),
        ("span_attributes", " Essential ", "essential"),
        ("category_overrides", [("a*", "llm"), ("b*", "tool")], (("a*", "llm"), ("b*", "tool"))),
        ("category_overrides", "", ()),
    ],
)
def test_accepted_spellings(option: str, value: Any, expected: Any) -> None:
    assert getattr(resolve_config(environ={}, **{option: value}), option) == expected


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_traces", 2.5),
        ("max_traces", "ten"),
        ("max_traces", False),
        ("max_spans_per_trace", 0),
        ("trace_timeout_s", float("inf")),
        ("trace_timeout_s", float("nan")),
        ("trace_timeout_s", True),
        ("sample_rate", -0.1),
        ("sample_rate", float("nan")),
        ("sample_rate", True),
        ("category_overrides", "no-equals-sign"),
        ("category_overrides", "=tool"),
        ("category_overrides", 42),
        ("prices", 42),
        ("prices", "[1, 2]"),
        ("prices", {"gpt-4o": {"input": 1}}),
        ("prices", {"gpt-4o": {"input": 1, "output": 2, "discount": 3}}),
        ("prices", {"gpt-4o": {"input": -1, "output": 2}}),
        ("max_operations", 0),
    ],
)
def test_more_bad_arguments(option: str, value: Any) -> None:
    with pytest.raises(ValueError):
        resolve_config(environ={}, **{option: value})


# -- prices -----------------------------------------------------------------------------------


def test_prices_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES_ARG), encoding="utf-8")
    expected = {"gpt-4o": (2.0, 8.0, 1.0), "gpt-4o-mini": BUILT_IN_GPT_4O_MINI}
    for value in (path, str(path)):
        assert _prices_of(resolve_config(environ={}, prices=value).prices) == expected
    config = resolve_config(environ={env.OTEL_AGENT_PROFILER_PRICES: str(path)})
    assert _prices_of(config.prices) == expected


def test_prices_inline_json_argument() -> None:
    config = resolve_config(environ={}, prices=PRICES_ENV)
    assert _prices_of(config.prices) == {"gpt-4o": BUILT_IN_GPT_4O, "gpt-4o-mini": (0.1, 0.5, None)}


def test_prices_table_instance_is_used_as_is() -> None:
    table = PriceTable.from_mapping(PRICES_ARG)
    assert resolve_config(environ={}, prices=table).prices is table
    assert _prices_of(table) == {"gpt-4o": (2.0, 8.0, 1.0)}


def test_the_built_in_prices_are_the_default_and_an_empty_table_prices_nothing() -> None:
    assert _prices_of(resolve_config(environ={}).prices) == BUILT_IN_VIEW
    assert _prices_of(ProfilerConfig().prices) == BUILT_IN_VIEW
    for off in ({}, "{}"):
        assert _prices_of(resolve_config(environ={}, prices=off).prices) == {}
    assert _prices_of(resolve_config(environ={env.OTEL_AGENT_PROFILER_PRICES: "{}"}).prices) == {}


def test_missing_price_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ValueError, match=r"nope\.json"):
        resolve_config(environ={}, prices=str(missing))
    with caplog.at_level(logging.WARNING):
        config = resolve_config(environ={env.OTEL_AGENT_PROFILER_PRICES: str(missing)})
    assert _prices_of(config.prices) == BUILT_IN_VIEW
    assert any(env.OTEL_AGENT_PROFILER_PRICES in r.getMessage() for r in caplog.records)


def test_price_table_costs() -> None:
    table = resolve_config(environ={}, prices=PRICES_ARG).prices
    assert table is not None
    usage = TokenUsage(input=1_000_000, output=1_000_000, cached_input=500_000)
    assert table.cost_usd("gpt-4o", usage) == pytest.approx(0.5 * 2.0 + 0.5 * 1.0 + 8.0)
    # A dated snapshot is priced as its alias.
    assert table.cost_usd("gpt-4o-2024-08-06", usage) == pytest.approx(0.5 * 2.0 + 0.5 * 1.0 + 8.0)
    assert table.cost_usd("unknown-model", usage) is None


# -- category overrides -------------------------------------------------------------------------


def test_pattern_beats_conventions_and_explicit_attribute_beats_pattern() -> None:
    classifier = resolve_config(environ={}, category_overrides={"fetch_*": "tool", "*memory*": "memory"}).classifier()
    assert classifier("fetch_weather", {}) == "tool"
    # The pattern wins over the GenAI convention that says "chat".
    assert classifier("fetch_answer", {"gen_ai.operation.name": "chat"}) == "tool"
    assert classify("fetch_answer", {"gen_ai.operation.name": "chat"}) == "llm"
    # An explicit attribute wins over the pattern.
    assert classifier("fetch_weather", {"agent_profiler.category": "retrieval"}) == "retrieval"
    # An explicit attribute that is not a category is ignored.
    assert classifier("fetch_weather", {"agent_profiler.category": "bogus"}) == "tool"
    # No pattern matches: the conventions decide.
    assert classifier("chat gpt-4o", {"gen_ai.operation.name": "chat"}) == "llm"
    assert classifier("plain", {}) == "internal"
    assert classifier("load_memory_store", {}) == "memory"


def test_first_matching_pattern_wins() -> None:
    classifier = make_classifier((("fetch_*", "tool"), ("fetch_docs*", "retrieval")))
    assert classifier("fetch_docs_v2", {}) == "tool"
    classifier = make_classifier((("fetch_docs*", "retrieval"), ("fetch_*", "tool")))
    assert classifier("fetch_docs_v2", {}) == "retrieval"
    assert classifier("fetch_other", {}) == "tool"


def test_patterns_match_the_whole_name_shell_style() -> None:
    classifier = make_classifier((("tool.?", "tool"), ("[ab]gent", "agent")))
    assert classifier("tool.x", {}) == "tool"
    assert classifier("tool.xy", {}) == "internal"
    assert classifier("my tool.x", {}) == "internal"
    assert classifier("agent", {}) == "agent"
    assert classifier("bgent", {}) == "agent"


def test_without_overrides_the_conventions_classifier_is_used() -> None:
    assert ProfilerConfig().classifier() is classify


def test_every_category_is_accepted_in_overrides() -> None:
    text = ",".join(f"{category}_*={category}" for category in CATEGORIES)
    config = resolve_config(environ={env.OTEL_AGENT_PROFILER_CATEGORY_OVERRIDES: text})
    classifier = config.classifier()
    for category in CATEGORIES:
        assert classifier(f"{category}_work", {}) == category


# -- enabled ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, True), ("", True), ("true", True), ("false", False), ("0", False), ("off", False)],
)
def test_enabled_in_environment(raw: str | None, expected: bool, caplog: pytest.LogCaptureFixture) -> None:
    environ = {} if raw is None else {env.OTEL_AGENT_PROFILER_ENABLED: raw}
    with caplog.at_level(logging.WARNING):
        assert enabled_in_environment(environ) is expected
    assert not caplog.records


def test_bad_enabled_value_keeps_the_profiler_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert enabled_in_environment({env.OTEL_AGENT_PROFILER_ENABLED: "sometimes"}) is True
    assert any(env.OTEL_AGENT_PROFILER_ENABLED in r.getMessage() for r in caplog.records)


def test_bad_environment_never_breaks_the_processor(
    monkeypatch: pytest.MonkeyPatch, processors: list[AgentProfilerSpanProcessor], caplog: pytest.LogCaptureFixture
) -> None:
    for option, case in CASES.items():
        monkeypatch.setenv(_OPTIONS[option][0], case.bad_env_text)
    with caplog.at_level(logging.WARNING):
        processor = AgentProfilerSpanProcessor()
    processors.append(processor)
    assert processor.config == ProfilerConfig()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == len(CASES)
