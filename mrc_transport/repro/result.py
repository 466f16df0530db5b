"""An experiment's result: the JSON document, the table on the terminal, the Markdown.

The JSON is for scripts and for docs/repro.md: ``verified`` is true only when every byte
of every flow of every run (MRC and TCP) arrived and matched; ``rows`` hold the paper's
claims side by side with the lab's figures and a verdict in words; ``measured`` the
figures themselves; ``runs`` per run its flows (harness/report.py's FlowReport), the faults
as the lab logged them and the CPU; ``machine`` the date, the kernel, the load and whether
any run was CPU-bound (harness/machine.py). Times are seconds since each run's origin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mrc_transport.harness.report import fault_json, flow_reports, played_json, write_json
from mrc_transport.harness.timeline import flow_totals
from mrc_transport.repro.spec import Experiment, Findings, RunResult

RESULT_VERSION = 1


def run_document(res: RunResult) -> dict[str, Any]:
    """One run: its flows with their verification, its faults, its CPU."""
    flows = res.run.flows
    kinds = {f.name: f.kind for f in flows}
    reports = flow_reports(
        flow_totals(res.deliveries, res.t_origin, res.t_stop), kinds, res.verified, res.counters
    )
    by_name = {f.name: f for f in flows}
    longest = max((p.late_s for p in res.pauses), default=0.0)
    return {
        "name": res.run.name,
        "duration_s": res.run.duration_s,
        "observed_s": round(res.t_stop - res.t_origin, 3),
        "t_origin_mono": res.t_origin,
        "verified": bool(res.verified) and all(res.verified.values()),
        "flows": [
            {
                **asdict(r),
                "src": by_name[r.flow].src,
                "dst": by_name[r.flow].dst,
                "streams": by_name[r.flow].streams,
                "counters": res.counters.get(r.flow),
            }
            for r in reports
        ],
        "faults": [fault_json(f, res.t_origin) for f in res.faults],
        "steps": played_json(res.played, res.t_origin),
        "cpu": res.cpu.to_dict() if res.cpu is not None else None,
        "mrc_senders_cpu_s": round(res.mrc_cpu_s, 2),
        "host_pauses": {"count": len(res.pauses), "longest_ms": round(longest * 1e3, 1)},
        "loop": None if res.loop is None else _loop(res),
    }


def _loop(res: RunResult) -> dict[str, Any]:
    """A step loop's run: what it ran and each step (collective/report.py's fields)."""
    assert res.run.loop is not None
    assert res.loop is not None
    c = res.run.loop.config
    return {
        "collective": c.alg.name,
        "size": c.size,
        "transport": c.transport,
        "hosts": list(res.run.loop.hosts),
        "bindings": res.loop.bindings,
        "warmup_s": [round(s, 4) for s in res.loop.warmup_s],
        "steps": [
            {
                "t_start": round(s.t_start - res.t_origin, 4),
                "seconds": round(s.seconds, 4),
                "wrong": s.wrong,
            }
            for s in res.loop.steps
        ],
    }


def document(
    exp: Experiment[Any],
    cfg: Any,
    lab: str,
    knobs: Any,
    results: Sequence[RunResult],
    findings: Findings,
    machine: Mapping[str, Any],
    seconds: float,
) -> dict[str, Any]:
    runs = [run_document(r) for r in results]
    cpus = [r["cpu"] for r in runs if r["cpu"] is not None]
    return {
        "version": RESULT_VERSION,
        "experiment": exp.name,
        "title": exp.title,
        "paper": exp.paper,
        "verified": bool(runs) and all(r["verified"] for r in runs),
        "rows": [asdict(row) for row in findings.rows],
        "measured": dict(findings.numbers),
        "runs": runs,
        "lab": lab,
        "quick": cfg.quick,
        "knobs": asdict(knobs),
        "fabric": {"from": cfg.fabric_label, **cfg.topo.to_dict()},
        "machine": {
            **machine,
            "seconds": round(seconds, 1),
            "busy": max((c["busy"] for c in cpus), default=None),
            "steal": max((c["steal"] for c in cpus), default=None),
            "own": max((c["own"] for c in cpus), default=None),
            "cpu_bound_runs": [r["name"] for r in runs if r["cpu"] and r["cpu"]["cpu_bound"]],
        },
    }


def machine_line(doc: Mapping[str, Any]) -> str:
    """One sentence on the machine during the runs."""
    m = doc["machine"]
    text = f"{m['date']}, kernel {m['kernel']}, {m['cpus']} CPUs"
    if m.get("load_before"):
        text += f", load {'/'.join(f'{x:g}' for x in m['load_before'])} before"
    if m.get("busy") is not None:
        text += (
            f"; CPUs busy up to {100 * m['busy']:.0f}% (this experiment's processes up to "
            f"{100 * m['own']:.0f}%) and stolen up to {100 * m['steal']:.0f}% in a run"
        )
    bound = m.get("cpu_bound_runs") or []
    text += (
        f"; CPU-bound: {', '.join(bound)} (the figure may measure the CPU)"
        if bound
        else "; no run CPU-bound"
    )
    return text + f"; {m['seconds']:g} s in all"


def verified_line(doc: Mapping[str, Any]) -> str:
    n = sum(len(r["flows"]) for r in doc["runs"])
    loops = [r for r in doc["runs"] if r.get("loop")]
    if doc["verified"]:
        if loops:
            steps = sum(len(r["loop"]["steps"]) for r in loops)
            return f"every element of all {steps} steps' results of {len(loops)} loops verified"
        return f"every byte of all {n} flows verified"
    bad = [f"{r['name']}/{f['flow']}" for r in doc["runs"] for f in r["flows"] if not f["verified"]]
    bad += [f"{r['name']} (its steps)" for r in loops if not r["verified"]]
    return f"NOT verified: {', '.join(bad) or 'no flow ran'}"


def print_result(doc: Mapping[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"{doc['experiment']}: {doc['title']}", title_justify="left")
    for name in ("paper", "lab", "verdict"):
        table.add_column(name, ratio=1 if name == "verdict" else 2)
    for row in doc["rows"]:
        style = {True: "green", False: "red"}.get(row["agrees"], "yellow")
        table.add_row(row["claim"], row["lab"], f"[{style}]{row['verdict']}[/]")
    console.print(table)
    console.print(machine_line(doc), highlight=False)
    ok = doc["verified"]
    console.print(f"[{'green' if ok else 'bold red'}]{verified_line(doc)}[/]")


def markdown(doc: Mapping[str, Any]) -> str:
    """The table and the machine's state, as docs/repro.md quotes them."""
    lines = ["| paper | lab | verdict |", "|---|---|---|"]
    for row in doc["rows"]:
        cells = (row["claim"], row["lab"], row["verdict"])
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines += ["", f"{machine_line(doc)}; {verified_line(doc)}.", ""]
    return "\n".join(lines)


def write(out: Path, name: str, doc: Mapping[str, Any]) -> None:
    write_json(out / f"{name}.json", doc)
    (out / f"{name}.md").write_text(markdown(doc))
