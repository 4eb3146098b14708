"""Cascading planner for NPU subgraphs, independent of TVM.

The planner works on a PlannerGraph of Parts (one per NPU operator) joined by Tensors, and
chooses how to group Parts into cascades, how to stripe them, which buffering to use and where
each tensor lives, so that the network fits a memory budget at the fewest estimated cycles.
The design record is ``rfcs/0001-cascading-planner.md``.
"""
from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor
from planner.propagator import Propagator
from planner.stripes import StripeConfig

__all__ = ["Part", "PlannerError", "PlannerGraph", "Propagator", "StripeConfig", "Tensor"]
