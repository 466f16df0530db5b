"""`mrc repro`: the paper's experiments at lab scale, each a data description
(repro/spec.py, repro/experiments/) run by one engine (repro/engine.py) on a lab of its own,
reusing the demos' flows, fault schedules, records, timelines, reports and plots."""
