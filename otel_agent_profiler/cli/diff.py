"""``otel-agent-profiler diff BASELINE CANDIDATE``: did a change make runs slower, and is it real?

Each side is a trace file, a folder of them, or a trace store's search (``cli.sources.parse_side``).
The runs are compared per category and operation with a significance test (``analytics.compare``);
the exit code can gate CI.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

from ..core.units import plural
from ..report.progress import Progress, progress_enabled
from . import arguments, sources
from .arguments import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, error, write_output

# The reading, profiling and worker processes are imported where they are used: `--help` and the
# other commands need none of them.
if TYPE_CHECKING:
    from ..adapters.files import TraceFile
    from ..core.pricing import PriceTable

#: Exit code when the candidate regressed past the threshold.
EXIT_REGRESSION = 3
#: Exit code when nothing regressed but a side has too few runs to test the run totals, so "no
#: regression" would mean nothing (``--allow-few-runs`` makes it 0). Not 4: that is the other
#: commands' "over budget".
EXIT_TOO_FEW_RUNS = 5
#: Runs a side needs before its run totals are tested (``compare_runs(min_samples=...)``).
MIN_RUNS = 5


HELP = "compare two sets of runs and flag regressions (exit code for CI)"
#: Every exit code ``run`` returns, in the words and the order of precedence of ``analyze --help``'s.
EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} no regression, {EXIT_FAILURE} the output could not be written, {EXIT_BAD_INPUT} "
    "some input could not be read or the command line was wrong (the readable files are still compared), "
    f"{EXIT_REGRESSION} a regression (checked before unreadable input: a regression in the files that could "
    f"be read exits {EXIT_REGRESSION}), {EXIT_TOO_FEW_RUNS} too few runs to decide: no regression was found "
    f"but a side has fewer than {MIN_RUNS} runs, so a run's duration, cost and calls were not tested (checked "
    f"last: a run with unreadable input exits {EXIT_BAD_INPUT}; --allow-few-runs exits {EXIT_OK} then)."
)
DESCRIPTION = (
    "Compare the candidate runs to the baseline runs: per category and operation, the mean (or "
    "median) of duration, self time, critical-path time and tokens, with a Mann-Whitney U test. A "
    "metric regressed when it got worse by more than --threshold and the test says p < --alpha. "
    f"{EXIT_CODES_HELP} BASELINE and CANDIDATE are each one trace file or a folder "
    "of them (*.json, *.jsonl, *.ndjson, read recursively), or - for standard input (one side only): put "
    "the runs of one side in one folder. Either "
    f"side can be a trace store's search instead: {sources.SIDE_SYNTAX} (STORE is jaeger, tempo or phoenix). With "
    "prices (--prices, or the built-in ones), the cost of the runs is compared too."
)


def add_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument(
        "baseline",
        metavar="BASELINE",
        help="trace file or folder of the runs before the change, a store search, or - (standard input)",
    )
    diff.add_argument(
        "candidate",
        metavar="CANDIDATE",
        help="trace file or folder of the runs after the change, a store search, or - (standard input)",
    )
    diff.add_argument(
        "--threshold", type=float, default=0.10, help="relative worsening that counts (default: %(default)s)"
    )
    diff.add_argument("--alpha", type=float, default=0.05, help="significance level (default: %(default)s)")
    diff.add_argument(
        "--center", choices=("mean", "median"), default="mean", help="what to compare (default: %(default)s)"
    )
    diff.add_argument(
        "--p-adjust",
        choices=("none", "holm"),
        default="none",
        help=(
            "adjust the p-values for the number of metrics compared: holm (Holm-Bonferroni) keeps the chance of "
            "any false regression below --alpha (default: %(default)s)"
        ),
    )
    diff.add_argument(
        "--allow-few-runs",
        action="store_true",
        help=(
            f"exit 0, not {EXIT_TOO_FEW_RUNS}, when nothing regressed although a side has fewer than {MIN_RUNS} runs "
            "(the report still says the runs were too few)"
        ),
    )
    diff.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: %(default)s)")
    diff.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of standard output")
    arguments.add_prices_option(diff)
    arguments.add_progress_option(diff, while_="while reading and profiling")
    sources.add_store_options(diff, with_store=False)


# Set in each worker process: where it reports the steps it finished, for the progress bar.
_steps: Any = None


def _set_step_queue(steps: Any) -> None:
    global _steps
    _steps = steps


def _step(detail: str) -> None:
    if _steps is not None:
        _steps.put(detail)


class _FileSteps:
    """The loading progress of a worker: one step per file read, sent to the parent's bar."""

    def __init__(self) -> None:
        self._phase = ""

    def start(self, label: str, total: int) -> None:
        self._phase = label

    def advance(self, steps: int = 1, detail: str = "") -> None:
        from ..offline import READING

        if self._phase == READING:
            _step(detail)

    def close(self) -> None:
        pass


def _side(
    path: str, files: list[str], prices: PriceTable, fetched: list[TraceFile] | None = None
) -> tuple[Any, int, list[str]]:
    """Read and profile one side's runs (``files``, found in ``path``, or the traces ``fetched`` from a store):
    (span table, number of runs, error lines).

    Module level so a worker process can run it: the two sides are read and profiled in
    parallel, which is most of the command's time. Reports one step per file read, one for the
    profiling and one for the span table.
    """
    from ..analytics import span_table
    from ..analytics.compare import COMPARED_COLUMNS
    from ..offline import cyclic_gc_paused, load_profiles, profile_trace_files

    if fetched is None and not files:
        return None, 0, [f"{path}: no trace files (*.json, *.jsonl, *.ndjson) in this folder"]
    with cyclic_gc_paused():
        # Error lines are printed by the parent, once the progress bar is done.
        if fetched is not None:
            loaded = profile_trace_files(fetched, prices=prices)
        else:
            loaded = load_profiles(files, prices=prices, progress=_FileSteps())
        profiles = loaded.profiles
        for profile in profiles:
            profile.release()
        _step("profiled")
        table = span_table(profiles, columns=COMPARED_COLUMNS) if profiles else None
        _step("tabled")
    return table, len(profiles), loaded.error_lines


def _steps_of(files: list[str], fetched: list[TraceFile] | None) -> int:
    if fetched is not None:
        return 2
    return len(files) + 2 if files else 0


#: One side to read: what the user gave, its trace files, and the traces fetched when it is a store.
_Side = tuple[str, list[str], "list[TraceFile] | None"]


def _both_sides(sides: list[_Side], prices: PriceTable, progress: Progress) -> list[tuple[Any, int, list[str]]]:
    import queue
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from ..offline.workers import worker_context

    progress.start("reading and profiling", sum(_steps_of(files, fetched) for _, files, fetched in sides))
    try:
        # Forked when that is safe, else spawned: the one rule of offline.workers.worker_context.
        context = worker_context()
        steps = context.Queue()
        with ProcessPoolExecutor(
            max_workers=2, mp_context=context, initializer=_set_step_queue, initargs=(steps,)
        ) as pool:
            futures = [pool.submit(_side, path, files, prices, fetched) for path, files, fetched in sides]
            while not all(future.done() for future in futures):
                with contextlib.suppress(queue.Empty):
                    progress.advance(detail=steps.get(timeout=0.1))
            return [future.result() for future in futures]
    except (OSError, BrokenProcessPool):
        # No worker processes here (a sandbox, a frozen app): do the sides one after the other.
        local: queue.SimpleQueue[str] = queue.SimpleQueue()
        _set_step_queue(local)
        try:
            results = []
            for path, files, fetched in sides:
                results.append(_side(path, files, prices, fetched))
                while not local.empty():
                    progress.advance(detail=local.get())
            return results
        finally:
            _set_step_queue(None)


def _read_sides(args: argparse.Namespace, progress: Progress) -> list[_Side] | None:
    """Each side's trace files, or its traces fetched from a store (here: the workers need no network);
    None, with the error line printed, when a side names a store wrongly or the store cannot be read."""
    from ..adapters.files import read_trace_file
    from ..errors import CannotAnalyse
    from ..offline.store_loading import fetch_store

    sides: list[_Side] = []
    if args.baseline == "-" and args.candidate == "-":
        args.usage_error("standard input (-) can be one side only: BASELINE or CANDIDATE, not both")
    for side in (args.baseline, args.candidate):
        if side == "-":
            # Read here: the side is profiled in a worker process, whose standard input is not ours.
            sides.append((side, [], [read_trace_file("-")]))
            continue
        if not sources.is_store_side(side):
            sides.append((side, arguments.trace_files(side), None))
            continue
        try:
            query = sources.parse_side(side)
        except ValueError as exc:
            args.usage_error(str(exc))
        try:
            fetched = fetch_store(sources.store_source(query, args, sources.http_settings(args)), progress)
        except (CannotAnalyse, ValueError) as exc:
            progress.close()
            error(str(exc))
            return None
        sides.append((side, [], fetched))
    return sides


def run(args: argparse.Namespace) -> int:
    try:
        prices = arguments.resolve_prices(args.prices)
    except ValueError as exc:
        error(str(exc))
        return EXIT_BAD_INPUT
    progress = Progress(progress_enabled(args.progress))
    sides = _read_sides(args, progress)
    if sides is None:
        return EXIT_BAD_INPUT
    try:
        (baseline, baseline_runs, baseline_errors), (candidate, candidate_runs, candidate_errors) = _both_sides(
            sides, prices, progress
        )
        # pandas is imported here, not at module level (`analyze` should not pay for it), and only once
        # the sides' workers started: its native threads would make them spawned, not forked.
        from ..analytics import Comparison, compare_runs

        progress.start("comparing", 1)
        comparison: Comparison | None = None
        problem = ""
        if baseline is not None and candidate is not None:
            try:
                from ..offline import cyclic_gc_paused

                with cyclic_gc_paused():
                    comparison = compare_runs(
                        baseline,
                        candidate,
                        threshold=args.threshold,
                        alpha=args.alpha,
                        center=args.center,
                        p_adjust=args.p_adjust,
                        min_samples=MIN_RUNS,
                    )
            except ValueError as exc:
                problem = str(exc)
        progress.advance()
    finally:
        progress.close()
    for line in (*baseline_errors, *candidate_errors):
        error(line)
    inputs_ok = not baseline_errors and not candidate_errors
    if baseline is None or candidate is None:
        error("nothing to compare: " + ("no baseline runs" if baseline is None else "no candidate runs"))
        return EXIT_BAD_INPUT
    if comparison is None:
        error(problem)
        return EXIT_BAD_INPUT
    if args.format == "json":
        table = comparison.table.astype(object).where(comparison.table.notna(), None)
        document = {
            "baseline_runs": baseline_runs,
            "candidate_runs": candidate_runs,
            "threshold": args.threshold,
            "alpha": args.alpha,
            "center": args.center,
            "p_adjust": args.p_adjust,
            "regression": comparison.has_regression,
            # Whether a side had too few runs (fewer than min_runs) for its run totals to be tested:
            # then "regression": false is no evidence that nothing regressed.
            "too_few_runs": comparison.too_few_runs,
            "min_runs": MIN_RUNS,
            "untested_rows": comparison.untested_rows,
            "rows": table.to_dict(orient="records"),
        }
        import json

        report = json.dumps(document, indent=2, default=str) + "\n"
    else:
        runs = f"{plural(baseline_runs, 'baseline run')}, {plural(candidate_runs, 'candidate run')}"
        report = f"{runs}\n{comparison.summary()}\n"
    if not write_output(args.output, report):
        return EXIT_FAILURE
    if comparison.has_regression:
        return EXIT_REGRESSION
    if not inputs_ok:
        return EXIT_BAD_INPUT
    if comparison.too_few_runs and not args.allow_few_runs:
        return EXIT_TOO_FEW_RUNS
    return EXIT_OK
