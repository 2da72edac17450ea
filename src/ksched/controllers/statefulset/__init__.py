"""The StatefulSet controller, in the files upstream's ``pkg/controller/statefulset`` has:
``controller`` (stateful_set.go), ``control`` (stateful_set_control.go), ``pod_control``
(stateful_pod_control.go) and ``utils`` (stateful_set_utils.go)."""

from ksched.controllers.statefulset.controller import StatefulSetController

__all__ = ["StatefulSetController"]
