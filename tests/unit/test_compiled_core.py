"""The check that keeps an edited protocol core from running its old compiled build."""

from __future__ import annotations

import os
import pathlib

import mrc_transport


def _tree(root: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    (root / "protocol").mkdir()
    group = root / "_core__mypyc.cpython-311-x86_64-linux-gnu.so"
    compiled = root / "protocol" / "sender.cpython-311-x86_64-linux-gnu.so"
    source = root / "protocol" / "sender.py"
    for path in (source, group, compiled):
        path.write_bytes(b"")
    os.utime(source, (1000, 1000))
    for path in (group, compiled):
        os.utime(path, (2000, 2000))
    return group, compiled, source


def test_a_build_newer_than_its_sources_is_current(tmp_path: pathlib.Path) -> None:
    _tree(tmp_path)
    assert not mrc_transport._compiled_core_is_stale(tmp_path)


def test_an_edited_source_makes_the_build_stale(tmp_path: pathlib.Path) -> None:
    _, _, source = _tree(tmp_path)
    os.utime(source, (3000, 3000))
    assert mrc_transport._compiled_core_is_stale(tmp_path)


def test_an_interpreted_module_edited_after_the_build_does_not(tmp_path: pathlib.Path) -> None:
    _tree(tmp_path)
    events = tmp_path / "protocol" / "events.py"  # not compiled: it runs from source anyway
    events.write_bytes(b"")
    os.utime(events, (3000, 3000))
    assert not mrc_transport._compiled_core_is_stale(tmp_path)


def test_no_build_is_never_stale(tmp_path: pathlib.Path) -> None:
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "sender.py").write_bytes(b"")
    assert not mrc_transport._compiled_core_is_stale(tmp_path)
