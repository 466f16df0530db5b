"""linkload.busiest_host: the sender below a measured link."""

from __future__ import annotations

import pytest

from labs.topology import preset
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import busiest_host

DEFAULT = preset("default")


def test_the_host_whose_port_in_the_links_plane_sent_most() -> None:
    link = "t0-p2-1:t1-p2-3"  # rack 1's T0 in plane 2
    before = {("h5", "p2"): 100, ("h6", "p2"): 0, ("h6", "p1"): 0}
    after = {("h5", "p2"): 200, ("h6", "p2"): 5000, ("h6", "p1"): 90000, ("h0", "p2"): 10**9}
    assert busiest_host(DEFAULT, DEFAULT.hosts, link, before, after) == "h6"


def test_no_host_in_that_rack_is_an_error() -> None:
    with pytest.raises(HarnessError, match="rack below t0-p0-1:t1-p0-0"):
        busiest_host(DEFAULT, ("h0", "h1"), "t0-p0-1:t1-p0-0", {}, {})
