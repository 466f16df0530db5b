"""The check that keeps an edited protocol core from being tested with its old compiled
build (mrc_transport/backend.py ``stale_sources``, run by tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import pathlib

from mrc_transport import backend


def _build(root: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A source tree under root/src and an installed build of it under root/build."""
    source = root / "src" / "mrc_transport" / "protocol" / "sender.py"
    source.parent.mkdir(parents=True)
    source.write_text("x = 1\n")
    built = root / "build"
    built.mkdir()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    (built / backend.MANIFEST).write_text(json.dumps({"mrc_transport/protocol/sender.py": digest}))
    return built, source


def test_a_build_of_the_current_sources_is_current(tmp_path: pathlib.Path) -> None:
    built, _ = _build(tmp_path)
    assert backend.stale_sources(built, tmp_path / "src") == []


def test_an_edited_source_makes_the_build_stale(tmp_path: pathlib.Path) -> None:
    built, source = _build(tmp_path)
    source.write_text("x = 2\n")
    assert backend.stale_sources(built, tmp_path / "src") == ["mrc_transport/protocol/sender.py"]


def test_a_removed_source_makes_the_build_stale(tmp_path: pathlib.Path) -> None:
    built, source = _build(tmp_path)
    source.unlink()
    assert backend.stale_sources(built, tmp_path / "src") == ["mrc_transport/protocol/sender.py"]


def test_an_interpreted_module_edited_after_the_build_does_not(tmp_path: pathlib.Path) -> None:
    built, source = _build(tmp_path)
    (source.parent / "events.py").write_text("y = 1\n")  # not compiled: it runs from source
    assert backend.stale_sources(built, tmp_path / "src") == []


def test_no_build_is_never_stale(tmp_path: pathlib.Path) -> None:
    assert backend.stale_sources(tmp_path, tmp_path) == []
