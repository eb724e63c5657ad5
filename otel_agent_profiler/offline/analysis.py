"""``analyze``'s engine: inputs and options in, the traces profiled (with findings and what-ifs) out.

:func:`analyze_inputs` picks the road: in memory; shard by shard from temporary files (inputs
bigger than memory); or shards held in memory (the text report of many traces, which keeps only
each trace's totals and findings). The command line renders what it yields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..core.findings import Finding, WhatIfProjection, find_all, what_ifs_together
from ..core.units import plural
from ..errors import CannotAnalyse
from ..report.cross_trace import MANY_TRACES
from ..report.progress import Progress
from .halves import HalvedAnalysis, profiled_in_halves
from .inputs import OfflineInputs
from .loading import LoadedProfiles, cyclic_gc_paused, profile_read_files, read_trace_files
from .on_disk import NOT_ON_DISK, ShardedAnalysis, held, on_disk
from .options import AnalyzeOptions
from .shards import on_disk_wanted
from .split_reading import read_in_halves
from .store_loading import load_inputs
from .workers import map_in_order, workers_for


@dataclass
class InMemoryAnalysis:
    """Every trace's profile, with its findings (when made) and what-if projection."""

    loaded: LoadedProfiles
    #: By trace id; None when findings were not asked for.
    findings: dict[str, list[Finding]] | None
    #: By trace id; empty without what-ifs.
    projected: dict[str, WhatIfProjection]


def refused_on_disk(inputs: OfflineInputs, options: AnalyzeOptions) -> str | None:
    """The option that cannot be honoured shard by shard, if one was given."""
    if options.prefix_cache:
        return "--prefix-cache"
    if inputs.prometheus is not None:
        return "--prometheus"
    if options.what_if and options.format == "text":
        return "--what-if with the text report"
    return None


@contextmanager
def analyze_inputs(
    inputs: OfflineInputs,
    options: AnalyzeOptions,
    *,
    progress: Progress,
    on_error_line: Callable[[str], None],
    on_note: Callable[[str], None] | None = None,
) -> Iterator[InMemoryAnalysis | ShardedAnalysis | HalvedAnalysis]:
    """The traces of ``inputs`` profiled as ``options`` say, for as long as the block runs.

    Error lines (a file not read whole, a trace the analysis failed on) go to ``on_error_line``
    as they are known, and are collected in the result. Raises :class:`CannotAnalyse` when there
    is nothing to analyse: a store or Prometheus could not be read, or an option is refused on disk.
    The cyclic garbage collector stays paused throughout: the profiles live until the end, and it
    would only traverse them again and again; what dies on the way dies young.
    """
    refused = refused_on_disk(inputs, options)
    if options.trace_ids:
        yield _chosen_traces(inputs, options, progress, on_error_line)
        return
    if inputs.store is not None and options.on_disk:
        raise CannotAnalyse("--on-disk reads trace files; traces fetched from a store are profiled in memory")
    with cyclic_gc_paused():
        if inputs.store is None and on_disk_wanted(inputs.files, options.on_disk):
            if refused is not None:
                raise CannotAnalyse(f"{refused} {NOT_ON_DISK}")
            with on_disk(inputs.files, inputs.prices, options, progress, on_error_line) as sharded:
                yield sharded
            return
        if _in_halves(inputs, options):
            with read_in_halves(
                inputs.files,
                options.workers,
                inputs.prices,
                options.finding_options.context_windows,
                options.output,
                progress,
                on_error_line,
            ) as read:
                if isinstance(read, HalvedAnalysis):
                    yield read
                    return
            trace_files, error_lines = read
            if workers_for(options.workers, sum(len(file.records) for file in trace_files)) > 1:
                with profiled_in_halves(
                    trace_files,
                    error_lines,
                    inputs.prices,
                    options.finding_options.context_windows,
                    options.output,
                    progress,
                    on_error_line,
                ) as halved:
                    if halved is not None:
                        yield halved
                        return
            loaded = profile_read_files(
                trace_files, error_lines, prices=inputs.prices, progress=progress, on_error_line=on_error_line
            )
            yield _in_memory(loaded, options, progress)
            return
        if inputs.store is not None or options.format != "text" or refused is not None:
            loaded = load_inputs(inputs, progress=progress, on_error_line=on_error_line, on_note=on_note)
        else:
            trace_files, error_lines = read_trace_files(inputs.files, progress=progress, on_error_line=on_error_line)
            if len({record.trace_id for file in trace_files for record in file.records}) > MANY_TRACES:
                # The text report of many traces keeps only their totals and findings: the workers
                # profile them too, a shard at a time, as on disk.
                yield held(trace_files, error_lines, inputs.prices, options, progress, on_error_line)
                return
            loaded = profile_read_files(
                trace_files, error_lines, prices=inputs.prices, progress=progress, on_error_line=on_error_line
            )
        yield _in_memory(loaded, options, progress)


def _in_halves(inputs: OfflineInputs, options: AnalyzeOptions) -> bool:
    """Whether the JSON report may profile the traces in halves (``offline.halves``): nothing but
    each trace's profile is asked for, and only the totals are made across traces."""
    return (
        options.format == "json"
        and not options.findings
        and not options.what_if
        and not options.prefix_cache
        and inputs.store is None
        and inputs.prometheus is None
    )


def _chosen_traces(
    inputs: OfflineInputs, options: AnalyzeOptions, progress: Progress, on_error_line: Callable[[str], None]
) -> InMemoryAnalysis:
    """The traces ``--trace`` names, read from the files and profiled in memory (the others are not
    profiled at all); raises :class:`CannotAnalyse` for a trace none of the files holds."""
    if inputs.store is not None:
        raise CannotAnalyse("--trace picks traces from trace files; a trace store reads them by id with --trace-id")
    if options.on_disk:
        raise CannotAnalyse("--trace profiles the traces it names in memory: leave out --on-disk")
    if inputs.prometheus is not None:
        raise CannotAnalyse("--trace cannot be combined with --prometheus: leave out one of them")
    trace_files, error_lines = read_trace_files(inputs.files, progress=progress, on_error_line=on_error_line)
    read = {record.trace_id for trace_file in trace_files for record in trace_file.records}
    for trace_id in options.trace_ids:
        if trace_id not in read:
            raise CannotAnalyse(f"no trace {trace_id} in the input ({plural(len(read), 'trace')} read)")
    wanted = set(options.trace_ids)
    chosen = [
        replace(trace_file, records=[record for record in trace_file.records if record.trace_id in wanted])
        for trace_file in trace_files
    ]
    loaded = profile_read_files(
        chosen, error_lines, prices=inputs.prices, progress=progress, on_error_line=on_error_line
    )
    return _in_memory(loaded, options, progress)


def _in_memory(loaded: LoadedProfiles, options: AnalyzeOptions, progress: Progress) -> InMemoryAnalysis:
    profiles = loaded.profiles
    workers = workers_for(options.workers, sum(profile.span_count for profile in profiles))
    findings: dict[str, list[Finding]] | None = None
    if options.findings:
        findings = {}
        progress.start("finding", len(profiles))
        found = map_in_order(lambda index: find_all(profiles[index], options.finding_options), len(profiles), workers)
        for profile, profile_findings in zip(profiles, found, strict=True):
            findings[profile.trace_id] = profile_findings
            progress.advance()
    projected = (
        {profile.trace_id: what_ifs_together(profile, options.what_if) for profile in profiles}
        if options.what_if
        else {}
    )
    progress.close()
    return InMemoryAnalysis(loaded, findings, projected)
