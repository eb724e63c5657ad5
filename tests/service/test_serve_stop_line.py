"""The line ``serve`` logs when it stops: a sentence with the counts, not a Python dict."""

from __future__ import annotations

import logging

import pytest

from otel_agent_profiler.service.app import ServeConfig, relay_stop_report, stop_report
from otel_agent_profiler.service.signals import LOGS, METRICS, Signal

#: ``Pipeline.health()["counts"]`` of a run where every span went through.
CLEAN = {
    "received": 1200,
    "profiled": 1200,
    "forwarded": 1200,
    "late": 0,
    "over_caps": 0,
    "failed": 0,
    "rejected": 0,
    "invalid": 0,
    "rejected_requests": 0,
    "traces_profiled": 30,
    "held_spans": 0,
    "held_traces": 0,
    "pending_spans": 0,
    "held_bytes": 0,
}
UPSTREAM = ServeConfig(upstream="http://collector:4317", shutdown_grace_s=30)


@pytest.mark.parametrize(
    ("config", "changes", "level", "line"),
    [
        (
            UPSTREAM,
            {},
            logging.INFO,
            "received 1,200 spans and profiled 1,200 of them in 30 traces; forwarded 1,200, 0 not delivered.",
        ),
        (
            ServeConfig(),
            {"forwarded": 0},
            logging.INFO,
            "received 1,200 spans and profiled 1,200 of them in 30 traces; no upstream, so nothing was forwarded.",
        ),
        (
            UPSTREAM,
            {"forwarded": 1150, "failed": 40, "rejected": 10},
            logging.WARNING,
            "received 1,200 spans and profiled 1,200 of them in 30 traces; forwarded 1,150, 40 not delivered "
            "(rejected by the upstream, or still held when the 30 s shutdown grace ended), 10 rejected in the "
            "upstream's answers (partial success); exit code 1.",
        ),
        (
            UPSTREAM,
            {"profiled": 1190, "traces_profiled": 1, "late": 7, "invalid": 3, "rejected_requests": 2},
            logging.INFO,
            "received 1,200 spans and profiled 1,190 of them in 1 trace (7 arrived after their trace was profiled "
            "and 3 had no usable trace id: passed on unprofiled); 2 requests pushed back while full, for the "
            "senders to retry; forwarded 1,200, 0 not delivered.",
        ),
    ],
)
def test_the_stop_line_is_a_sentence_with_the_counts(
    config: ServeConfig, changes: dict[str, int], level: int, line: str
) -> None:
    assert stop_report(config, {**CLEAN, **changes}) == (level, line)


def test_the_stop_line_shows_no_dict() -> None:
    _, line = stop_report(UPSTREAM, {**CLEAN, "failed": 1, "held_bytes": 512})
    assert "{" not in line and "'" not in line.replace("upstream's", "")


def test_scripts_find_the_counts_where_they_always_are() -> None:
    # The fault tests read (received, forwarded, not delivered, rejected) from the line.
    from tests.support.serve_stop_line import STOP_LINE, stop_counts

    for changes, counts in (
        ({}, (1200, 1200, 0, None)),
        ({"forwarded": 1150, "failed": 40, "rejected": 10}, (1200, 1150, 40, 10)),
        ({"forwarded": 0, "rejected": 1200}, (1200, 0, 0, 1200)),
    ):
        match = STOP_LINE.search(stop_report(UPSTREAM, {**CLEAN, **changes})[1])
        assert match is not None and stop_counts(match) == counts


@pytest.mark.parametrize(
    ("signal", "counts", "level", "line"),
    [
        (
            METRICS,
            {"received": 4000, "forwarded": 4000, "failed": 0, "rejected": 0, "requests": 20, "held": 0},
            logging.INFO,
            "metrics passed through: received 4,000 data points, forwarded 4,000.",
        ),
        (
            LOGS,
            {"received": 1, "forwarded": 0, "failed": 1, "rejected": 0, "requests": 1, "rejected_requests": 3},
            logging.WARNING,
            "logs passed through: received 1 log record, forwarded 0; 1 not delivered and 3 requests pushed back "
            "while full.",
        ),
    ],
)
def test_a_passed_through_signal_is_told_in_a_sentence(
    signal: Signal, counts: dict[str, int], level: int, line: str
) -> None:
    assert relay_stop_report(signal, counts) == (level, line)
