"""`mrc perf --lab LAB --from A --to B`: both ends at once, each a `mrc perf` process in
its lab host's namespace (the server -s -1 in B's, the client in A's); the client's output
is the run's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from mrc_transport.perf.options import OptionsError, PerfOptions

SERVER_WAIT = 15.0
"""Seconds the server may take to exit after its client did (it writes its files)."""
SERVER_GRACE = 2.0
"""After Ctrl-C: seconds the server has to end its test by itself, seeing the client's
close, before it gets the Ctrl-C too."""


def server_events_path(path: str) -> str:
    """The server's --events file beside the client's (a.jsonl -> a.server.jsonl)."""
    root, ext = os.path.splitext(path)
    return f"{root}.server{ext or '.jsonl'}"


def shared_argv(opts: PerfOptions) -> list[str]:
    """The flags both ends take, in argv form."""
    assert opts.lab is not None
    argv = ["-p", str(opts.port), "--lab", opts.lab, "--encoding", opts.encoding]
    argv += ["--evs", str(opts.evs), "--cc", opts.cc, "--cc-scope", opts.cc_scope]
    argv += ["--scheduler", opts.scheduler, "--recovery", opts.recovery]
    if opts.no_trim:
        argv.append("--no-trim")
    if opts.moderation != "bulk":
        argv += ["--moderation", opts.moderation]
    argv += ["--reverse-evs", str(opts.reverse_evs)]
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
    in the running lab. Ctrl-C ends the test as it ends a client's (its summary so far,
    exit 1) and leaves no process behind."""
    from labs.topology import namespace

    assert opts.lab is not None
    check_hosts(opts.lab, src, dst)
    srv = _start(namespace(opts.lab, dst), server_argv(opts), stdout=subprocess.DEVNULL)
    try:
        if not _server_ready(srv):
            return 1
        cli = _start(namespace(opts.lab, src), client_argv(opts, dst))
        try:
            rc = cli.wait()
        except KeyboardInterrupt:
            return _interrupted(cli, srv)
        return rc or _server_exit(srv)
    finally:
        _reap(srv)


def check_hosts(lab: str, *hosts: str) -> None:
    """OptionsError unless the lab is up and has every one of ``hosts``."""
    from labs.state import state_path
    from labs.topology import namespace

    if not os.path.exists(state_path(lab)):
        raise OptionsError(f"no lab {lab!r} is up (`mrc lab list` shows the labs)")
    for host in hosts:
        if not os.path.exists(f"/run/netns/{namespace(lab, host)}"):
            raise OptionsError(f"no host {host!r} in a running lab {lab!r}")


def _start(ns: str, argv: list[str], stdout: int | None = None) -> subprocess.Popen[str]:
    """``mrc perf argv`` in namespace ns, in a session of its own (a Ctrl-C at the terminal
    reaches only this runner, which hands it on once), dying with this process."""
    from labs.netns import die_with_parent

    py = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, *py, *argv],
        stdout=stdout,
        stderr=subprocess.PIPE if stdout is not None else None,
        text=True,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


def _server_ready(srv: subprocess.Popen[str]) -> bool:
    """Wait for the server's ready line; False (said on stderr) when it failed instead."""
    from mrc_transport.perf.server import READY_LINE

    assert srv.stderr is not None
    line = srv.stderr.readline()
    if line.startswith(READY_LINE.partition("{")[0]):
        return True
    srv.wait(5)
    print(f"mrc perf: server failed: {line.strip()} {srv.stderr.read().strip()}", file=sys.stderr)
    return False


def _interrupted(cli: subprocess.Popen[str], srv: subprocess.Popen[str]) -> int:
    """Ctrl-C: the client gets it (and prints its summary so far), then the server, whose
    test the client's close has ended; 1, as iperf3 exits on an interrupt."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: already ending
    try:
        _stop(cli, 0.0)
        _stop(srv, SERVER_GRACE)
    finally:
        signal.signal(signal.SIGINT, old)
    return 1


def _stop(proc: subprocess.Popen[str], grace: float) -> None:
    """Let ``proc`` end by itself within ``grace`` seconds, else hand it a Ctrl-C, else
    kill it."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(SERVER_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _server_exit(srv: subprocess.Popen[str]) -> int:
    try:
        return srv.wait(SERVER_WAIT)
    except subprocess.TimeoutExpired:
        srv.kill()
        return 1


def _reap(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
