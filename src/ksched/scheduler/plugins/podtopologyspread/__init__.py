"""PodTopologySpread (upstream ``pkg/scheduler/framework/plugins/podtopologyspread``, v1.36):
the plugin and its queueing hints (``plugin.py``), PreFilter/Filter (``filtering.py``),
PreScore/Score (``scoring.py``), constraints and selectors (``common.py``) and the columnar
domain ids and matching-pod counts they share (``_index.py``)."""

from ksched.scheduler.plugins.podtopologyspread.filtering import PRE_FILTER_STATE_KEY
from ksched.scheduler.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
    SYSTEM_DEFAULT_CONSTRAINTS,
    PodTopologySpread,
)
from ksched.scheduler.plugins.podtopologyspread.scoring import (
    PRE_SCORE_STATE_KEY,
    topology_normalizing_weight,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
    "topology_normalizing_weight",
]
