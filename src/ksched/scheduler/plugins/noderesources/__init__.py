"""The resource plugins: NodeResourcesFit (filter + LeastAllocated / MostAllocated /
RequestedToCapacityRatio scoring) and NodeResourcesBalancedAllocation."""

from __future__ import annotations

from ksched.scheduler.plugins.noderesources.balanced_allocation import BalancedAllocation
from ksched.scheduler.plugins.noderesources.fit import (
    Fit,
    InsufficientResource,
    fits,
    fits_request,
    insufficient_resources,
    request_checks,
)

__all__ = [
    "BalancedAllocation",
    "Fit",
    "InsufficientResource",
    "fits",
    "fits_request",
    "insufficient_resources",
    "request_checks",
]
