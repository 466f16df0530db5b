"""A run's endpoint: where its paths come from and its Config, which takes the lab's port
rates and the delay its hosts and switches add when a lab is what the paths come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mrc_transport.perf.options import OptionsError, PerfOptions

if TYPE_CHECKING:
    from labs.topology import Topology
    from mrc_transport.io.paths import PathProvider
    from mrc_transport.protocol import Config
    from srv6.path import SrPath

UNSHAPED_NIC_BPS = 100e9
"""Config.nic_rate_bps outside a lab: a port rate far above what a core sends."""


def provider(opts: PerfOptions) -> PathProvider:
    """--paths-file and --path, or the lab's paths (--lab, or the lab this host is in)."""
    from mrc_transport.io.paths import (
        LabPaths,
        PathError,
        StaticPaths,
        load_static,
        parse_path_spec,
    )

    try:
        if opts.paths_file or opts.path_specs:
            static = load_static(opts.paths_file) if opts.paths_file else StaticPaths()
            if opts.path_specs:
                if opts.host is None:
                    raise OptionsError("--path lists paths to -c HOST; a server uses --paths-file")
                static.add(opts.host, [parse_path_spec(s) for s in opts.path_specs])
            return static
        return LabPaths(opts.lab)
    except PathError as exc:
        raise OptionsError(str(exc)) from None


def client_paths(opts: PerfOptions, paths_from: PathProvider) -> list[SrPath]:
    """The client's paths to -c HOST, in the --planes only."""
    from mrc_transport.io.paths import PathError

    assert opts.host is not None
    try:
        paths = paths_from.paths_to(opts.host)
    except PathError as exc:
        raise OptionsError(str(exc)) from None
    if opts.planes:
        paths = [p for p in paths if p.plane in opts.planes]
        if not paths:
            planes = ",".join(map(str, opts.planes))
            raise OptionsError(f"--planes {planes}: no path to {opts.host} in those planes")
    return paths


def endpoint_config(opts: PerfOptions, paths_from: PathProvider) -> Config:
    """The endpoint's Config: the flags, and with a lab its port rates and host delay."""
    from mrc_transport.io.endpoint import default_mss
    from mrc_transport.io.tuning import IO_HOST_DELAY
    from mrc_transport.protocol import Config

    mss = opts.mss or default_mss(opts.encoding)
    topo: Topology | None = getattr(paths_from, "topo", None)
    nic_rate, delay, trimming = UNSHAPED_NIC_BPS, IO_HOST_DELAY, False
    if topo is not None:  # the lab's real port rate bounds NSCC's window (Config docstring)
        nic_rate = float(topo.host_link.rate_bps * topo.planes)
        delay += lab_host_delay(topo, mss)
        # a trimming fabric sets NSCC's target to 0.75 base RTT (Config.trimming), unless
        # this connection's data is never trimmed: it sees drops, as without trimming
        trimmed = topo.host_link.trim_at > 0 or topo.fabric_link.trim_at > 0
        trimming = trimmed and not opts.no_trim
    return Config(
        trimming=trimming,
        no_trim=opts.no_trim,
        mss=mss,
        ev_count=opts.evs,
        cc=opts.cc,
        cc_scope=opts.cc_scope,
        scheduler=opts.scheduler,
        reverse_evs=opts.reverse_evs,
        recovery=opts.recovery,
        nic_rate_bps=nic_rate,
        host_delay=delay,
    )


def lab_host_delay(topo: Topology, mss: int) -> float:
    """What a lab adds to Config.host_delay: a loaded path stores and forwards each packet
    at every hop (host-T0-T1-T0-host), but the min RTT is taken with full tbf buckets,
    which forward at once."""
    host, fabric = topo.host_link.rate_bps, topo.fabric_link.rate_bps
    return 2 * mss * 8 * (1 / host + 1 / fabric)
