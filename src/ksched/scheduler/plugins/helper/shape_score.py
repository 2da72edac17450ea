"""A broken-linear function of utilization (upstream's ``helper.BuildBrokenLinearFunction``,
``pkg/scheduler/framework/plugins/helper/shape_score.go``), shared by NodeResourcesFit's
RequestedToCapacityRatio strategy and VolumeBinding's Score."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["broken_linear", "build_broken_linear_function"]


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's ``/``."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """The score at utilization ``p`` of the (utilization, score) points ``shape`` (utilization
    strictly increasing): the first point's score below it, the last point's score above it,
    linear (Go integer arithmetic) in between."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            pu, ps = shape[i - 1]
            return ps + _go_div((s - ps) * (p - pu), u - pu)
    return shape[-1][1]


def build_broken_linear_function(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """``p -> broken_linear(shape, p)``, the points taken as integers once."""
    pts = tuple((int(u), int(s)) for u, s in shape)

    def f(p: int) -> int:
        return broken_linear(pts, p)

    return f
