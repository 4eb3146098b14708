"""The NPU emulator: a planned subgraph's TE graph scheduled as its Proposal says (stripes,
SRAM buffers, rings, line buffers: ``schedule``, ``line_buffer``), the planner graph read from
that TE graph (``part_matchers``), and the scheduled kernels made fast on the host without
changing what they compute (``stripe_kernels``)."""
