"""Simulation: virtual clock, workloads, trace loaders, reports."""
