"""Simulated node agents."""
