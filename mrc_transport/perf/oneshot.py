"""`mrc perf --lab LAB --from A --to B`: both ends at once, each a `mrc perf` process in
its lab host's namespace (the server -s -1 in B's, the client in A's); the client's output
is the run's."""

from __future__ import annotations

import os
import subprocess
import sys

from mrc_transport.perf.options import OptionsError, PerfOptions

SERVER_WAIT = 15.0
"""Seconds the server may take to exit after its client did (it writes its files)."""


def server_events_path(path: str) -> str:
    """The server's --events file beside the client's (a.jsonl -> a.server.jsonl)."""
    root, ext = os.path.splitext(path)
    return f"{root}.server{ext or '.jsonl'}"


def shared_argv(opts: PerfOptions) -> list[str]:
    """The flags both ends take, in argv form."""
    assert opts.lab is not None
    argv = ["-p", str(opts.port), "--lab", opts.lab, "--encoding", opts.encoding]
    argv += ["--evs", str(opts.evs), "--cc", opts.cc, "--cc-scope", opts.cc_scope]
    argv += ["--scheduler", opts.scheduler]
    if opts.mss:
        argv += ["--mss", str(opts.mss)]
    return argv


def server_argv(opts: PerfOptions) -> list[str]:
    """The server's flags: one test, no interval lines; its files beside the client's."""
    argv = ["-s", "-1", *shared_argv(opts), "-i", "0"]
    if opts.events:
        argv += ["--events", server_events_path(os.path.abspath(opts.events))]
    if opts.records and not opts.reverse:
        argv += ["--records", os.path.abspath(opts.records), "--flow", opts.flow]
    return argv


def client_argv(opts: PerfOptions, dst: str) -> list[str]:
    """The client's flags: the test and the output as asked for."""
    argv = ["-c", dst, *shared_argv(opts), "-i", str(opts.interval), "-P", str(opts.parallel)]
    argv += ["-b", str(opts.rate_bps), "-l", str(opts.length)]
    if opts.duration is not None:
        argv += ["-t", str(opts.duration)]
    if opts.nbytes:
        argv += ["-n", str(opts.nbytes)]
    if opts.reverse:
        argv.append("-R")
    if opts.planes:
        argv += ["--planes", ",".join(map(str, opts.planes))]
    argv += {"text": [], "json": ["-J"], "stream": ["--json-stream"]}[opts.output]
    if opts.logfile:
        argv += ["--logfile", opts.logfile]
    if opts.seed is not None:
        argv += ["--seed", str(opts.seed)]
    if opts.events:
        argv += ["--events", os.path.abspath(opts.events)]
    if opts.records and opts.reverse:
        argv += ["--records", os.path.abspath(opts.records), "--flow", opts.flow]
    return argv


def run_one_shot(opts: PerfOptions, src: str, dst: str) -> int:
    """Start the server in dst's namespace, the client in src's, relay the client's output;
    the exit code (the client's, else the server's). OptionsError for a host that is not
    in the running lab."""
    from labs.state import state_path
    from labs.topology import namespace

    assert opts.lab is not None
    if not os.path.exists(state_path(opts.lab)):
        raise OptionsError(f"no lab {opts.lab!r} is up (`mrc lab list` shows the labs)")
    for host in (src, dst):
        if not os.path.exists(f"/run/netns/{namespace(opts.lab, host)}"):
            raise OptionsError(f"no host {host!r} in a running lab {opts.lab!r}")
    py = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
    ns = ["ip", "netns", "exec"]
    srv = subprocess.Popen(
        [*ns, namespace(opts.lab, dst), *py, *server_argv(opts)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert srv.stderr is not None
        line = srv.stderr.readline()  # "Server listening on PORT", or an error
        if not line.startswith("Server listening"):
            srv.wait(5)
            print(
                f"mrc perf: server failed: {line.strip()} {srv.stderr.read().strip()}",
                file=sys.stderr,
            )
            return 1
        rc = subprocess.call([*ns, namespace(opts.lab, src), *py, *client_argv(opts, dst)])
        try:
            srv_rc = srv.wait(SERVER_WAIT)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv_rc = 1
        return rc or srv_rc
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
