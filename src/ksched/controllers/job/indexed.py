"""Completion indexes of Indexed Jobs, as upstream's ``pkg/controller/job/indexed_job_utils.go``:
ordered intervals (``status.completedIndexes`` and ``failedIndexes`` read and written as
``"1,3-5,7"``), the first pending indexes, the index of a pod, and which active pods of a
repeated or out-of-range index are removed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ksched.api.batch import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
)
from ksched.api.pod import Pod

__all__ = ["UNKNOWN_INDEX", "Intervals", "completion_index", "first_pending_indexes", "pod_generate_name",
           "split_duplicated_index_pods"]

UNKNOWN_INDEX = -1
MAX_GENERATED_NAME_LENGTH = 58

Intervals = tuple[tuple[int, int], ...]


def completion_index(pod: Pod) -> int:
    """The pod's ``batch.kubernetes.io/job-completion-index`` annotation, or -1."""
    v = pod.annotations.get(JOB_COMPLETION_INDEX_ANNOTATION)
    if v is None:
        return UNKNOWN_INDEX
    try:
        i = int(v)
    except ValueError:
        return UNKNOWN_INDEX
    return i if i >= 0 else UNKNOWN_INDEX


def _int_annotation(pod: Pod, key: str) -> int:
    try:
        v = int(pod.annotations.get(key, "0"))
    except ValueError:
        return 0
    return v if 0 <= v <= 2**31 - 1 else 0


def index_failure_count(pod: Pod) -> int:
    return _int_annotation(pod, JOB_INDEX_FAILURE_COUNT_ANNOTATION)


def index_ignored_failure_count(pod: Pod) -> int:
    return _int_annotation(pod, JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)


def merge(a: Intervals, b: Intervals) -> Intervals:
    """Two ordered interval lists as one (adjacent intervals joined)."""
    out: list[list[int]] = []
    for first, last in sorted((*a, *b)):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return tuple((f, la) for f, la in out)


def with_indexes(a: Intervals, indexes: Iterable[int]) -> Intervals:
    return merge(a, tuple((i, i) for i in sorted(set(indexes))))


def total(a: Intervals) -> int:
    return sum(la - f + 1 for f, la in a)


def has(a: Intervals, i: int) -> bool:
    return any(f <= i <= la for f, la in a)


def to_string(a: Intervals) -> str:
    parts = []
    for f, la in a:
        if la == f:
            parts.append(str(f))
        elif la == f + 1:
            parts.append(f"{f},{la}")
        else:
            parts.append(f"{f}-{la}")
    return ",".join(parts)


def parse(text: str | None, completions: int) -> Intervals:
    """parseIndexesFromString: corrupted parts skipped, indexes from ``completions`` on dropped."""
    if not text:
        return ()
    out: list[tuple[int, int]] = []
    for part in text.split(","):
        limits = part.split("-")
        try:
            first = int(limits[0])
        except ValueError:
            continue
        if first >= completions:
            break
        last = first
        if len(limits) > 1:
            try:
                last = min(int(limits[1]), completions - 1)
            except ValueError:
                continue
        if out and out[-1][1] == first - 1:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return tuple(out)


def first_pending_indexes(non_pending: Intervals, count: int, completions: int) -> list[int]:
    """The ``count`` lowest indexes below ``completions`` not in ``non_pending``."""
    out: list[int] = []
    candidate = 0
    for first, last in non_pending:
        while candidate < completions and len(out) < count and candidate < first:
            out.append(candidate)
            candidate += 1
        candidate = max(candidate, last + 1)
    while candidate < completions and len(out) < count:
        out.append(candidate)
        candidate += 1
    return out


def split_duplicated_index_pods(pods: Sequence[Pod], completions: int,
                                order: Callable[[Pod], Any]) -> tuple[list[Pod], list[Pod]]:
    """appendDuplicatedIndexPodsForRemoval: (to remove, to keep). Pods without an index or with
    one out of range are removed; of several pods of one index all but the best (last in
    ``order``, the ActivePods order) are removed."""
    rm: list[Pod] = []
    keep: list[Pod] = []
    by_index: dict[int, list[Pod]] = {}
    for p in pods:
        ix = completion_index(p)
        if ix == UNKNOWN_INDEX or ix >= completions:
            rm.append(p)
        else:
            by_index.setdefault(ix, []).append(p)
    for ix in sorted(by_index):
        group = sorted(by_index[ix], key=order)
        rm.extend(group[:-1])
        keep.append(group[-1])
    return rm, keep


def pod_generate_name(job_name: str, index: int) -> str:
    """podGenerateNameWithIndex: ``<job>-<index>-``, the job name cut so the whole fits 58."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[:MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix
