"""CPU sets in the Linux list format (``k8s.io/utils/cpuset``): ``"0-3,8,10-11"``.

A set is a plain ``frozenset[int]``; :func:`parse` and :func:`format_cpuset` convert to and
from the list format the kubelet writes in its checkpoints and ``cpuset.cpus``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CPUSet", "format_cpuset", "parse"]

CPUSet = frozenset[int]


def parse(s: str) -> CPUSet:
    """``"0-2,7"`` → {0, 1, 2, 7}; an empty string is the empty set. ValueError names the bad
    part."""
    out: set[int] = set()
    s = s.strip()
    if not s:
        return frozenset()
    for part in s.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"invalid cpuset {s!r}: {part!r} is not a CPU or a range of CPUs") from None
        if a < 0 or b < a:
            raise ValueError(f"invalid cpuset {s!r}: range {part!r} is not ascending from 0 or more")
        out.update(range(a, b + 1))
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """The list format, runs of consecutive CPUs as ranges: {0, 1, 2, 7} → ``"0-2,7"``."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)
