"""An example out-of-tree plugin: prefer cheaper nodes.

Nodes carry a label ``example.com/hourly-cost`` (an integer, e.g. cents per hour). The plugin
scores cheaper nodes higher (0..100 after normalization) and filters out nodes above a maximum
cost given in its args. Use it with a configuration such as examples/plugins/config.yaml:

    PYTHONPATH=examples/plugins ksched simulate examples/cluster --config examples/plugins/config.yaml
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ksched.plugins import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    NodeInfo,
    NodeList,
    Pod,
    ScoreExtensions,
    ScorePlugin,
    Status,
)

LABEL = "example.com/hourly-cost"


def _cost(ni: NodeInfo) -> int:
    if ni.node is None:
        return 0
    try:
        return int(ni.node.labels.get(LABEL, "0"))
    except ValueError:
        return 0


class CostAware(FilterPlugin, ScorePlugin, ScoreExtensions, EnqueueExtensions):
    name = "CostAware"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.max_cost = int(self.args.get("maxHourlyCost", 10**9))

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if _cost(node_info) > self.max_cost:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) cost more than the pod may spend")
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return _cost(node_info), None

    def normalize_score(self, state: CycleState, pod: Pod, nodes: NodeList, scores: np.ndarray) -> Status | None:
        # Cheapest node gets 100, the most expensive 0.
        hi = int(scores.max()) if len(scores) else 0
        if hi == 0:
            scores[:] = 100
        else:
            scores[:] = 100 - scores * 100 // hi
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A node added, or relabelled, may be cheap enough now.
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL))]
