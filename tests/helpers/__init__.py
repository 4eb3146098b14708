"""Shared by the test modules (which import this package, never each other): oracles,
builders of graphs and devices, Hypothesis strategies, and where the shipped models are."""
