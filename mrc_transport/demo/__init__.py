"""Workshop demo building blocks: timelines, fault schedules, the TCP baseline, reports,
plots and the live view. The `mrc demo` CLI wires them to the lab and the MRC endpoint."""
