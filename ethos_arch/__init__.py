"""What the Ethos NPUs and their operators are, for every layer of the project: TVM-free and
dependency-free, so the planner, the stream model and the compiler all read the same tables."""
