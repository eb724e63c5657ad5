"""Files written whole or not at all: what a failure half-way leaves behind."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from otel_agent_profiler.offline.atomic_files import replaced_atomically


class _Interrupted(Exception):
    pass


def test_the_content_appears_at_the_path_once_complete(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    with replaced_atomically(str(target)) as stream:
        stream.write(b"first half, ")
        assert not target.exists()  # nothing that looks like a result before it is one
        stream.write(b"second half\n")
    assert target.read_bytes() == b"first half, second half\n"
    assert os.listdir(tmp_path) == ["report.txt"]


def test_a_failure_half_way_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    target.write_bytes(b"yesterday's report\n")
    with pytest.raises(_Interrupted), replaced_atomically(str(target)) as stream:
        stream.write(b"today's rep")
        raise _Interrupted
    assert target.read_bytes() == b"yesterday's report\n"
    assert os.listdir(tmp_path) == ["report.txt"]


def test_a_failure_half_way_leaves_no_file_where_there_was_none(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), replaced_atomically(str(tmp_path / "new.json")) as stream:
        stream.write(b'{"traces": [')
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_a_new_file_gets_the_permissions_open_gives_it_and_a_replaced_one_keeps_its_own(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        with replaced_atomically(str(tmp_path / "new.html")) as stream:
            stream.write(b"<html>")
        kept = tmp_path / "kept.html"
        kept.write_bytes(b"old")
        kept.chmod(0o640)
        with replaced_atomically(str(kept)) as stream:
            stream.write(b"new")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.html").stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640


def test_a_symbolic_link_keeps_pointing_at_its_file_which_gets_the_content(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "latest.txt"
    real.write_bytes(b"old")
    link = tmp_path / "latest.txt"
    link.symlink_to(real)
    with replaced_atomically(str(link)) as stream:
        stream.write(b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path / "reports")) == ["latest.txt"]


def test_a_device_is_written_directly_not_replaced(tmp_path: Path) -> None:
    # Replacing /dev/null by a regular file would break the machine; it is written as a file is.
    with replaced_atomically(os.devnull) as stream:
        stream.write(b"discarded")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_standard_output_named_as_a_path_is_written_directly_when_it_is_a_pipe() -> None:
    # `report --summary-json /dev/stdout | jq`: the name leads to a pipe through /proc.
    script = (
        "from otel_agent_profiler.offline.atomic_files import replaced_atomically\n"
        "with replaced_atomically('/dev/stdout') as stream:\n"
        "    stream.write(b'through the pipe')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"through the pipe"


@pytest.mark.parametrize(("name", "error"), [("missing/report.txt", FileNotFoundError), (".", IsADirectoryError)])
def test_a_path_that_cannot_be_a_file_raises_as_open_does_before_anything_is_written(
    tmp_path: Path, name: str, error: type[OSError]
) -> None:
    with pytest.raises(error), replaced_atomically(str(tmp_path / name)):
        pytest.fail("the block ran")
    assert os.listdir(tmp_path) == []
