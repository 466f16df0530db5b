"""`mrc repro`: the paper's experiments at lab scale, each a data description
(repro/spec.py, repro/experiments/) run by one engine (repro/engine.py) on a lab of its own,
on the harness (mrc_transport/harness/): flows, fault schedules, records, timelines,
reports and plots."""
