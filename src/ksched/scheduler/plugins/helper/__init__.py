"""Helpers shared by the in-tree plugins (upstream's ``pkg/scheduler/framework/plugins/helper``):
node affinity (``node_affinity.go``, over ``component-helpers``' nodeaffinity), score
normalization (``normalize_score.go``) and broken-linear functions (``shape_score.go``).
Upstream's ``spread.go`` (DefaultSelector) lives with PodTopologySpread, its only user here;
``taint.go``'s DoNotScheduleTaintsFilterFunc is the default ``effects`` of
``ksched.api.taints.find_untolerated_taint``."""

from ksched.scheduler.plugins.helper.node_affinity import (
    OBJECT_NAME_FIELD,
    CompiledNodeSelector,
    NodeSelectorParseError,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    compile_node_selector,
    compile_preferred_terms,
    get_required_node_affinity,
    parse_int64,
)
from ksched.scheduler.plugins.helper.normalize_score import default_normalize_score, go_div
from ksched.scheduler.plugins.helper.shape_score import broken_linear, build_broken_linear_function

__all__ = [
    "OBJECT_NAME_FIELD",
    "CompiledNodeSelector",
    "NodeSelectorParseError",
    "PreferredSchedulingTerms",
    "RequiredNodeAffinity",
    "broken_linear",
    "build_broken_linear_function",
    "compile_node_selector",
    "compile_preferred_terms",
    "default_normalize_score",
    "get_required_node_affinity",
    "go_div",
    "parse_int64",
]
