"""The Deployment controller, in the files upstream's ``pkg/controller/deployment`` has:
``controller`` (handlers and the sync dispatch), ``sync`` (ReplicaSets, scaling, history,
status), ``rolling``, ``recreate``, ``progress``, ``rollback`` and ``util``."""

from ksched.controllers.deployment.controller import DeploymentController

__all__ = ["DeploymentController"]
