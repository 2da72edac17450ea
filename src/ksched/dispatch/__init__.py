"""Several scheduler instances on one cluster: the dispatcher (load balancing, label policy,
re-dispatch when an instance dies), instance registration through Leases, and the conflict
resolution webhook for real clusters."""
