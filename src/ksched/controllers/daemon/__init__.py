"""The DaemonSet controller, in the files upstream's ``pkg/controller/daemon`` has: ``controller``
(daemon_controller.go), ``update`` (update.go) and ``util`` (util/daemonset_util.go)."""

from ksched.controllers.daemon.controller import DaemonSetsController

__all__ = ["DaemonSetsController"]
