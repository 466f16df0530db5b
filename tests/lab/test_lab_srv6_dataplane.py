"""The switches' SRv6 dataplane: the BPF switch (labs/bpf/srv6_switch.c) forwards every path
of every encoding, as the kernel's seg6local does, and a lab asking for a dataplane this
kernel lacks says so in one line."""

from __future__ import annotations

from dataclasses import replace

import pytest

from labs import bpf, kernel, netns
from labs.apply import down, up
from labs.check import ENCODINGS, run_check
from labs.errors import LabError
from labs.faults import Lab
from labs.paths import paths
from labs.state import load_state
from labs.topology import namespace, preset

pytestmark = pytest.mark.lab


def test_the_bpf_switch_forwards_every_path_in_every_encoding(lab_name: str) -> None:
    up(replace(preset("tiny"), srv6="bpf"), lab_name)
    topo = load_state(lab_name).topology
    assert topo.srv6 == "bpf"
    results = run_check(lab_name, topo, timeout=0.6)
    hosts = topo.hosts
    pairs = sum(len(paths(topo, s, d)) for s in hosts for d in hosts if s != d)
    assert len(results) == len(ENCODINGS) * pairs
    assert {r.encoding for r in results} == {"usid", "srh", "encap"}
    assert [r for r in results if not r.ok] == []
    assert (bpf.pin_dir(lab_name) / "srv6_switch").exists()
    down(lab_name)
    assert not bpf.pin_dir(lab_name).exists()  # down removes the lab's pins


def test_a_hard_cut_and_restore_keep_the_program_on_the_port(lab_name: str) -> None:
    up(replace(preset("tiny"), srv6="bpf"), lab_name)
    lab = Lab(lab_name)
    link = "t0-p0-0:t1-p0-1"
    lab.cut(link, "hard")
    lab.restore(link)
    results = run_check(lab_name, lab.topo, timeout=0.6)
    assert [r for r in results if not r.ok and link in r.links] == []


def test_auto_picks_what_the_kernel_has(lab_name: str) -> None:
    up(preset("tiny"), lab_name)
    assert load_state(lab_name).topology.srv6 == kernel.srv6_dataplane()


def test_seg6local_is_used_where_the_kernel_has_it_and_refused_in_one_line_elsewhere(
    lab_name: str,
) -> None:
    topo = replace(preset("tiny"), srv6="seg6local")
    if kernel.has_seg6local():
        up(topo, lab_name)
        assert [r for r in run_check(lab_name, topo, timeout=0.6) if not r.ok] == []
        return
    with pytest.raises(LabError, match="no seg6local routes") as err:
        up(topo, lab_name)
    assert "\n" not in str(err.value)
    assert not netns.exists(namespace(lab_name, "h0"))  # refused before building anything
