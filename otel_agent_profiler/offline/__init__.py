"""The offline engine: exported trace files (or a trace store's answer) in, profiles and reports out.

``loading`` is the one loading pipeline every offline road reads through; ``shards`` profiles
inputs bigger than memory shard by shard; ``workers`` spreads per-trace work over processes.
The loading pipeline's names are re-exported here, as they were when it was ``offline.py``.

Internal: used by the command line and ``analytics``; read files with the public
``read_trace_file`` and profile them with ``profile_records``.
"""

from .loading import (
    PROFILING,
    PROFILING_BUGS,
    READING,
    FileRead,
    LoadedProfiles,
    LoadProgress,
    cyclic_gc_paused,
    files_read,
    load_profiles,
    profile_groups,
    profile_read_files,
    profile_trace_files,
    read_trace_files,
)

__all__ = [
    "PROFILING",
    "PROFILING_BUGS",
    "READING",
    "FileRead",
    "LoadProgress",
    "LoadedProfiles",
    "cyclic_gc_paused",
    "files_read",
    "load_profiles",
    "profile_groups",
    "profile_read_files",
    "profile_trace_files",
    "read_trace_files",
]
