"""The serviceaccount controller (upstream's ``pkg/controller/serviceaccount/
serviceaccounts_controller.go``, ``serviceaccount`` in kube-controller-manager's
``--controllers``): every active namespace has a ``default`` ServiceAccount, made again if it is
deleted. Pods run as it unless they name another (the ServiceAccount admission plugin)."""

from __future__ import annotations

from typing import Any

from ksched.api.errors import AlreadyExists
from ksched.api.namespace import Namespace
from ksched.api.serviceaccount import DEFAULT_SERVICE_ACCOUNT
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.clock import Clock
from ksched.controllers.controller import Controller

__all__ = ["ServiceAccountsController"]

# The accounts every namespace gets (upstream's ServiceAccountsControllerOptions.ServiceAccounts).
SERVICE_ACCOUNTS = (DEFAULT_SERVICE_ACCOUNT,)


class ServiceAccountsController(Controller):
    """Keys are namespace names."""

    name = "serviceaccount"

    def __init__(self, client: Any, informers: InformerFactory, clock: Clock) -> None:
        super().__init__(client, informers, clock)
        self.namespaces = informers.informer("Namespace")
        self.accounts = informers.informer("ServiceAccount")
        self.namespaces.add_handler(EventHandler(self._on_namespace, lambda old, new: self._on_namespace(new)))
        self.accounts.add_handler(EventHandler(on_delete=self._on_account_deleted))

    def _on_namespace(self, ns: Any) -> None:
        self.queue.add(ns.name)

    def _on_account_deleted(self, sa: Any) -> None:
        target = sa.obj if isinstance(sa, DeletedFinalStateUnknown) else sa
        if target.name in SERVICE_ACCOUNTS:
            self.queue.add(target.namespace)

    def sync(self, key: Any) -> None:
        ns = self.namespaces.get(str(key))
        if not isinstance(ns, Namespace) or ns.phase != "Active" or ns.deletion_timestamp is not None:
            return  # nothing is made in a namespace that is going away
        for name in SERVICE_ACCOUNTS:
            if self.accounts.get(f"{ns.name}/{name}") is not None:
                continue
            try:
                self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": name, "namespace": ns.name}}, owned=True)
            except AlreadyExists:
                pass
