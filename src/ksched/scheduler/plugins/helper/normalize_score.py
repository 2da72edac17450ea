"""Score normalization shared by Score plugins (upstream's ``helper.DefaultNormalizeScore``,
``pkg/scheduler/framework/plugins/helper/normalize_score.go``)."""

from __future__ import annotations

import numpy as np

from ksched.scheduler.framework.reduce import max_1d, min_1d
from ksched.scheduler.framework.status import Status

__all__ = ["default_normalize_score", "go_div"]


def go_div(num: np.ndarray, den: int) -> np.ndarray:
    """Integer division truncated toward zero, as Go's ``/`` on int64 (``den > 0``)."""
    q = np.abs(num) // den
    return np.where(num < 0, -q, q)


def default_normalize_score(max_priority: int, reverse: bool, scores: np.ndarray) -> Status | None:
    """Scale ``scores`` (int64, modified in place) so the highest becomes ``max_priority``:
    ``s' = max_priority * s / max`` (integer division), or ``max_priority - that`` when
    ``reverse``. When the highest score is not positive the scores are left alone, or all set to
    ``max_priority`` when ``reverse``."""
    if len(scores) == 0:
        return None
    max_count = int(max_1d(scores))
    if max_count <= 0:
        # Upstream starts its running maximum at 0, so only a positive maximum rescales.
        if reverse:
            scores[:] = max_priority
        return None
    prod = scores.astype(np.int64, copy=False) * max_priority
    # Floor and truncating division agree unless a score is negative.
    out = prod // max_count if int(min_1d(scores)) >= 0 else go_div(prod, max_count)
    if reverse:
        out = max_priority - out
    scores[:] = out
    return None
