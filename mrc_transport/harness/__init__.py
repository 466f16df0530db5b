"""The experiments' harness: what runs a transport on a lab and watches it.

Named for what a test harness is: the rig around the thing under test that drives it and
records what it does. Here that is flows on a running lab (``flows``, ``procs``,
``launch``) between hosts picked by a pattern (``patterns``), the fault schedules played
meanwhile (``schedule``, over labs/faultkinds.py; ``linkload`` finds the TCP flow's link
that its placeholders name), every delivery stamped and joined with the lab's fault log
(``records``, ``timeline``, ``windows``, ``paths``, ``pauses``), the figures read from them
(``fairness``, ``report``, ``plot``) and the baselines MRC is measured against
(``tcpflow``, single-path TCP). The workshop demos (demo/), the paper's experiments
(repro/) and what comes next (an MPTCP baseline, collectives) are its users; neither of
the first two imports the other."""
