"""Cluster clients (in-process and REST) and informers."""
