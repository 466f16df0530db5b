"""The workshop demos: failover (faults under an MRC transfer and a TCP flow, with a live
view) and collisions (the two-rack permutation). Each is a run of the experiments' harness
(mrc_transport/harness/) that the `mrc demo` CLI starts."""
