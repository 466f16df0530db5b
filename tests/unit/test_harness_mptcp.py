"""harness/mptcp.py without a lab: the settings it reads and the one-line refusals when
MPTCP cannot run (the lab test sets net.mptcp.enabled=0 in a real namespace)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrc_transport.harness import mptcp
from mrc_transport.harness.errors import HarnessError


@pytest.fixture
def sysctls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /proc/sys/net/mptcp, 'entered' in any namespace."""

    @contextlib.contextmanager
    def anywhere(_ns: str) -> Iterator[None]:
        yield

    monkeypatch.setattr(mptcp, "SYSCTL_DIR", tmp_path)
    monkeypatch.setattr(mptcp.netns, "entered", anywhere)
    return tmp_path


def test_settings_read_what_the_namespace_has(sysctls: Path) -> None:
    (sysctls / "enabled").write_text("1\n")
    (sysctls / "path_manager").write_text("kernel\n")
    (sysctls / "scheduler").write_text("default\n")
    assert mptcp.read_settings() == {
        "enabled": "1",
        "path_manager": "kernel",
        "scheduler": "default",
    }


def test_a_kernel_without_mptcp_is_refused_in_one_line(sysctls: Path) -> None:
    with pytest.raises(HarnessError) as info:
        mptcp.check_ready("lab", ["h4", "h0"])
    assert str(info.value).startswith("this kernel has no MPTCP")
    assert "--baselines tcp" in str(info.value)


def test_mptcp_off_in_a_namespace_is_refused_in_one_line(sysctls: Path) -> None:
    (sysctls / "enabled").write_text("0\n")
    with pytest.raises(HarnessError) as info:
        mptcp.check_ready("lab", ["h4"])
    assert str(info.value) == (
        "MPTCP is off in h4's namespace (net.mptcp.enabled=0): leave mptcp out of "
        "--baselines, e.g. --baselines tcp"
    )
    (sysctls / "enabled").write_text("1\n")
    mptcp.check_ready("lab", ["h4"])
