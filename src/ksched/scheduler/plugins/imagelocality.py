"""ImageLocality: favours nodes that already hold the images of the pod's containers and init
containers, weighting each image's size by the share of nodes that have it (so an image on a
single node does not pull every pod there).

Upstream: pkg/scheduler/framework/plugins/imagelocality (1.36)::

    sum   = Σ_containers size(image) · numNodesWithImage / totalNodes   (per image, truncated)
    max   = 1000 MiB · (#initContainers + #containers),  min = 23 MiB
    score = 100 · (clamp(sum, min, max) - min) / (max - min)

Image names without a tag get ``:latest`` before they are looked up in the node's images.
No NormalizeScore.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.api.pod import Pod
from ksched.scheduler.cache.snapshot import Snapshot
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorizedScore,
    ZeroScore,
)
from ksched.scheduler.framework.signers import IMAGE_NAMES_SIGNER_NAME
from ksched.scheduler.framework.status import Status
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import ImageStateSummary, NodeInfo

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MB",
    "MIN_THRESHOLD",
    "ImageLocality",
    "calculate_priority",
    "normalized_image_name",
    "scaled_image_score",
]

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """Append ``:latest`` when the reference carries no tag (no ':' after the last '/')."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(state: ImageStateSummary, total_num_nodes: int) -> int:
    """The image's size scaled by the fraction of nodes that have it (float64, truncated)."""
    spread = float(state.num_nodes) / float(total_num_nodes)
    return int(float(state.size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    num = MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD)
    den = max_threshold - MIN_THRESHOLD
    # Go's truncating division (the operands only go negative for a pod without containers).
    q = abs(num) // abs(den)
    return q if (num >= 0) == (den > 0) else -q


def _pod_images(pod: Pod) -> tuple[str, ...]:
    """Normalized images of init containers then containers (one entry per container)."""
    c = template_cache(pod)
    imgs = c.get("imagelocality.images")
    if imgs is None:
        imgs = c["imagelocality.images"] = tuple(
            normalized_image_name(ct.image) for ct in (*pod.init_containers, *pod.containers))
    return imgs  # type: ignore[no-any-return]


class ImageLocality(ScorePlugin, VectorizedScore, SignPlugin, ZeroScore):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        # For scores_zero: the images held by some node of one snapshot, while its nodes stay the same.
        self._zero_memo: tuple[Any, int, frozenset[str]] = (None, -1, frozenset())

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        """The score depends on the images of the pod's containers and init containers (as
        upstream: their normalized names, sorted)."""
        c = pod.cached()
        v = c.get("sign:images")
        if v is None:
            v = c["sign:images"] = tuple(sorted(_pod_images(pod)))
        return [SignFragment(IMAGE_NAMES_SIGNER_NAME, v)], None

    def _total_nodes(self, node_info: NodeInfo | None = None) -> int:
        h = self.handle
        snap = getattr(h, "snapshot", None) if h is not None else None
        if snap is not None:
            return int(snap.num_nodes)
        return 1

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        total = self._total_nodes(node_info)
        images = _pod_images(pod)
        states = node_info.image_states
        s = 0
        if states:
            for img in images:
                st = states.get(img)
                if st is not None:
                    s += scaled_image_score(st, total)
        return calculate_priority(s, len(images)), None

    @staticmethod
    def _present(snapshot: Snapshot, img: str) -> np.ndarray:
        """Which rows' nodes hold the image (kept by the snapshot as nodes change)."""
        return snapshot.row_values(("ImageLocality.present", img), lambda ni: img in ni.image_states)

    def scores_zero(self, state: CycleState, pod: Pod) -> bool:
        """No node holds any of the pod's images: every sum is 0, which scores 0 (below the
        minimum threshold). The pod's images are its signature part, and which nodes hold an
        image changes only with the nodes."""
        snapshot = getattr(self.handle, "snapshot", None) if self.handle is not None else None
        if snapshot is None:
            return False
        memo = self._zero_memo
        if memo[0] is not snapshot or memo[1] != snapshot.nodes_generation:
            # Every image some node holds (the union of what ``_present`` looks up row by row).
            held = frozenset(img for ni in snapshot.infos if ni is not None and ni.node is not None
                             for img in ni.image_states)
            memo = self._zero_memo = (snapshot, snapshot.nodes_generation, held)
        held = memo[2]
        # (No image on any node, the simulator's usual cluster: the pod's images are not needed.)
        return not held or held.isdisjoint(_pod_images(pod))

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        total = snapshot.num_nodes
        images = _pod_images(pod)
        n = len(rows)
        sums = np.zeros(n, dtype=np.int64)
        counts: dict[str, int] = {}
        for img in images:
            counts[img] = counts.get(img, 0) + 1
        infos = snapshot.infos
        present_any = False
        for img, k in counts.items():
            present = self._present(snapshot, img)
            if not present.any():
                continue  # on no node at all: adds nothing anywhere
            present_any = True
            sel = present[rows]
            if not sel.any():
                continue
            # Every node holding the image shares one ImageStateSummary (size, node count).
            first = int(rows[int(np.argmax(sel))])
            st = infos[first].image_states[img]  # type: ignore[union-attr]
            sums += sel.astype(np.int64) * (k * scaled_image_score(st, total))
        if not present_any:
            return sums  # every sum is 0, which scores 0 (below the minimum threshold)
        num_containers = len(images)
        max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
        if max_threshold <= MIN_THRESHOLD:
            return np.asarray([calculate_priority(int(v), num_containers) for v in sums.tolist()], dtype=np.int64)
        clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
        return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (max_threshold - MIN_THRESHOLD)
