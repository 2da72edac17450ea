"""Several scheduler instances on one cluster."""
