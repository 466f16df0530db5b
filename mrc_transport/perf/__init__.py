"""`mrc perf`: iperf3's test over MRC connections, as a library; cli/perf.py parses the
flags into a ``PerfOptions`` and calls ``run_client``, ``run_server`` or ``run_one_shot``.

- options.py: ``PerfOptions``, one run's flags, parsed and checked;
- messages.py: what the two ends send each other (P, E, R), one frozen dataclass each;
- session.py: one connection's test on the wire (the messages in turn, the digest);
- jsonobj.py: records that are JSON objects, read back checked when a peer sent them;
- report.py: the start, interval and end documents (iperf3's JSON) as frozen dataclasses;
- summary.py: those documents from a run's live ``StreamStats``;
- output.py: text lines, -J, --json-stream, and the --records and --events files;
- reporter.py: the interval lines while the streams run;
- config.py: the endpoint's paths and Config (with the lab's port rates and host delay);
- client.py, server.py, oneshot.py: the three ways to run.
"""
