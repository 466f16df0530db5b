"""Collectives over the lab's hosts (`mrc collective`): nccl-tests' all-reduce, all-gather
and all-to-all over MRC, MPTCP or TCP, and a training step's loop through faults.

The pure parts: the schedules (``algorithms``), nccl-tests' bandwidths and the fabric's
ideal (``bandwidth``), the ranks' data and its check (``data``), the table (``table``) and
the step statistics (``steps``). The rest runs them on a lab: the ranks' connections
(``links``), an iteration (``run``), the sweep of sizes (``sweep``) and the step loop
(``steploop``), its figures (``figures``).
"""
