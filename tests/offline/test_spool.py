"""``EncodedSpool``: bytes kept in an unnamed file beside an output, read back whole, and kept in
memory when the file cannot take them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from otel_agent_profiler.offline.spool import EncodedSpool

DOCUMENTS = {f"trace-{n}": bytes([n % 251]) * (1000 + 37 * n) for n in range(50)}


def test_what_is_added_is_read_back_byte_for_byte_and_leaves_no_file(tmp_path: Path) -> None:
    spool = EncodedSpool(beside=str(tmp_path / "summary.json"))
    for key, data in DOCUMENTS.items():
        spool.add(key, data)
    spool.add("trace-3", b'{"replaced":true}')
    assert os.listdir(tmp_path) == []  # the file has no name
    expected = {**DOCUMENTS, "trace-3": b'{"replaced":true}'}
    assert dict(spool) == expected
    assert len(spool) == len(expected)
    assert spool.get("missing") is None
    spool.close()
    with pytest.raises(KeyError):
        spool["trace-0"]


def test_a_folder_that_cannot_take_the_file_uses_the_system_temporary_folder(tmp_path: Path) -> None:
    spool = EncodedSpool(beside=str(tmp_path / "no such folder" / "summary.json"))
    spool.add("a", b"[1,2,3]")
    assert spool["a"] == b"[1,2,3]"
    spool.close()


def test_a_file_that_stops_taking_bytes_costs_only_memory(tmp_path: Path) -> None:
    # A real limit on file sizes (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with
    # EFBIG): the first documents fit in the file, the later ones are kept in memory.
    script = textwrap.dedent(
        f"""
        import resource, sys
        from otel_agent_profiler.offline.spool import EncodedSpool
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
        spool = EncodedSpool(beside={str(tmp_path / "summary.json")!r})
        documents = {{f"t{{n}}": bytes([n]) * 30_000 for n in range(8)}}
        for key, data in documents.items():
            spool.add(key, data)
        assert dict(spool) == documents, "a document changed"
        assert len(spool._placed) == 3 and len(spool._held) == 5, (spool._placed, list(spool._held))
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
