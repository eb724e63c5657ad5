"""The offline engine: exported trace files (or a trace store's answer) in, profiles and reports out.

``loading`` is the one loading pipeline every offline road reads through; ``shards`` profiles
inputs bigger than memory shard by shard; ``workers`` spreads per-trace work over processes.
The loading pipeline's names are re-exported here, as they were when it was ``offline.py``.

Internal: used by the command line and ``analytics``; read files with the public
``read_trace_file`` and profile them with ``profile_records``.
"""

from typing import TYPE_CHECKING

from ..core.lazy_exports import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
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

# Each name is imported from its module on first use: a command that uses one
# module of the engine (`--help` reads a few constants) loads that module, not the pipeline.
_EXPORTED_FROM = {
    "PROFILING": "loading",
    "PROFILING_BUGS": "loading",
    "READING": "loading",
    "FileRead": "loading",
    "LoadedProfiles": "loading",
    "LoadProgress": "loading",
    "cyclic_gc_paused": "loading",
    "files_read": "loading",
    "load_profiles": "loading",
    "profile_groups": "loading",
    "profile_read_files": "loading",
    "profile_trace_files": "loading",
    "read_trace_files": "loading",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


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
