"""The conflict resolver for real clusters: a ValidatingAdmissionWebhook (AdmissionReview v1,
HTTPS) for ``pods/binding`` CREATE that denies a binding which would over-commit its node, or
break a required pod anti-affinity, a DoNotSchedule topology spread or a ReadWriteOncePod claim
given the pods already bound (``ksched.api.podconflicts``).

The embedded API server checks bindings itself (``Store(conflict_resolver=True)``); a real
kube-apiserver does not, so several schedulers binding to one node could over-commit it. This
webhook performs the same check (``ksched.api.accounting.NodeAccounting``: resources,
extended resources, hugepages, pod count, host ports) against

* its own informer view of the cluster (every bound pod, every node), plus
* the bindings it has admitted but not yet observed through the informer (a binding admitted
  a millisecond ago counts before the watch event arrives; an admission never observed, e.g.
  because a later admission step refused the binding, is forgotten after ``admitted_ttl``).

A denial carries HTTP code 409 and reason Conflict, which the kube-apiserver passes on to the
scheduler (``admission webhook "binding.ksched.io" denied the request: Operation cannot be
fulfilled on pods/binding "p": node n would be over-committed on cpu: ...``); a ksched
instance forgets the assumed pod and retries at once. Because every scheduler's bindings go
through the same webhook, the check is sound as long as one webhook replica serves (run one,
with ``failurePolicy: Fail``; see docs/multi-scheduler.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
import time
from typing import Any

from aiohttp import web

from ksched.aioserver import BackgroundServer
from ksched.api.accounting import NodeAccounting
from ksched.api.errors import ApiError, BindingConflict, NotFound
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.podconflicts import BoundPods, pod_conflict
from ksched.api.storage import PersistentVolumeClaim
from ksched.client.informer import DeletedFinalStateUnknown, EventHandler, InformerFactory
from ksched.scheduler.schedule_one import pod_with_node

__all__ = ["BindingWebhook", "WEBHOOK_NAME"]

log = logging.getLogger(__name__)

WEBHOOK_NAME = "binding.ksched.io"
_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


def _unwrap(obj: Any) -> Any:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class BindingWebhook:
    """``review(AdmissionReview) -> AdmissionReview``; ``start()`` serves it over HTTPS from a
    background thread (POST ``/validate``, also ``/``; GET ``/healthz``)."""

    def __init__(self, client: Any, *, host: str = "127.0.0.1", port: int = 8443,
                 ssl_context: ssl.SSLContext | None = None, informers: InformerFactory | None = None,
                 admitted_ttl: float = 30.0, monotonic: Any = time.monotonic,
                 allow_plain_http: bool = False) -> None:
        if ssl_context is None and not allow_plain_http:
            raise ValueError("an admission webhook is served over HTTPS: an ssl_context is required")
        self.client = client
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.admitted_ttl = admitted_ttl
        self.monotonic = monotonic
        self.informers = informers or InformerFactory(client)
        self.accounting = NodeAccounting()
        self.bound = BoundPods()  # the same pods, for the checks between pods
        # Admitted, not yet observed bindings: pod key -> [(node, assumed pod, when)].
        self.admitted: dict[str, list[tuple[str, Pod, float]]] = {}
        self.allowed = 0
        self.denied = 0
        self._lock = threading.RLock()
        self._background = False
        self._pods = self.informers.informer("Pod")
        self._nodes = self.informers.informer("Node")
        self._pods.add_handler(EventHandler(self._on_pod_add, self._on_pod_update, self._on_pod_delete))
        self._server: BackgroundServer | None = None

    # ---------------------------------------------------------------- the view

    def _settle(self, pod: Pod) -> None:
        """The informer now shows the pod bound (or finished): its admissions are observed."""
        if pod.key in self.admitted and (pod.node_name or pod.is_terminal):
            self._drop_admitted(pod.key)

    def _drop_admitted(self, key: str) -> None:
        for _, assumed, _ in self.admitted.pop(key, ()):
            self.accounting.remove(assumed)
            self.bound.remove(assumed)

    def _on_pod_add(self, pod: Pod) -> None:
        self._settle(pod)
        self.accounting.add(pod)
        self.bound.add(pod)

    def _on_pod_update(self, old: Pod, new: Pod) -> None:
        self._settle(new)
        self.accounting.update(old, new)
        self.bound.update(old, new)

    def _on_pod_delete(self, obj: Any) -> None:
        pod = _unwrap(obj)
        self._drop_admitted(pod.key)
        self.accounting.remove(pod)
        self.bound.remove(pod)

    def _expire(self) -> None:
        limit = self.monotonic() - self.admitted_ttl
        for key in [k for k, v in self.admitted.items() if any(t < limit for _, _, t in v)]:
            keep = [e for e in self.admitted[key] if e[2] >= limit]
            for _, assumed, t in self.admitted[key]:
                if t < limit:
                    self.accounting.remove(assumed)
                    self.bound.remove(assumed)
            if keep:
                self.admitted[key] = keep
            else:
                del self.admitted[key]

    def sync(self) -> None:
        """Bring the view up to date with what the informers have received."""
        if self._background:
            self.informers.process()
        else:
            self.informers.poll()

    # ---------------------------------------------------------------- the check

    def check(self, namespace: str, name: str, node_name: str, dry_run: bool = False) -> str | None:
        """Why binding pod ``namespace/name`` to ``node_name`` must be refused, or None (then the
        binding counts as admitted, unless ``dry_run``)."""
        key = f"{namespace}/{name}"
        with self._lock:
            self.sync()
            self._expire()
            pod = self._pods.get(key)
        if pod is None:
            try:
                pod = self.client.get("Pod", namespace, name)
            except NotFound:
                return None  # the API server answers that binding itself
        assert isinstance(pod, Pod)
        if pod.node_name:
            return None  # already bound: the API server refuses the binding itself
        with self._lock:
            node = self._nodes.get(node_name)
            if node is None:
                try:
                    node = self.client.get("Node", "", node_name)
                except NotFound:
                    node = None
            why = self.accounting.check(pod, node if isinstance(node, Node) else None, node_name)
            if why is None and isinstance(node, Node):
                why = self._pod_conflict(pod, node)
            if why is not None:
                self.denied += 1
                return why
            self.allowed += 1
            if not dry_run:
                assumed = pod_with_node(pod, node_name)
                self.accounting.add(assumed)
                self.bound.add(assumed)
                self.admitted.setdefault(key, []).append((node_name, assumed, self.monotonic()))
            return None

    def _pod_conflict(self, pod: Pod, node: Node) -> str | None:
        """Anti-affinity, spread and ReadWriteOncePod against the bound and admitted pods
        (``ksched.api.podconflicts``). A namespace's labels (for a term's namespaceSelector) and
        a claim's access modes are read from the API server when a check needs them."""
        nodes = [n for n in self._nodes.list() if isinstance(n, Node)]
        by_name = {n.name: n for n in nodes}

        def ns_labels(name: str) -> dict[str, str] | None:
            try:
                return self.client.get("Namespace", "", name).labels  # type: ignore[no-any-return]
            except NotFound:
                return None

        def claim_of(namespace: str, name: str) -> PersistentVolumeClaim | None:
            try:
                c = self.client.get("PersistentVolumeClaim", namespace, name)
            except NotFound:
                return None
            return c if isinstance(c, PersistentVolumeClaim) else None

        return pod_conflict(pod, node, self.bound, nodes=nodes, node_of=by_name.get, ns_labels=ns_labels,
                            claim_of=claim_of)

    def review(self, body: Any) -> dict[str, Any]:
        """Answer one AdmissionReview (raises ValueError on a malformed one)."""
        if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
            raise ValueError("expected an AdmissionReview")
        api_version = body.get("apiVersion") or "admission.k8s.io/v1"
        if api_version not in _API_VERSIONS:
            raise ValueError(f"unsupported AdmissionReview version {api_version!r}")
        req = body.get("request")
        if not isinstance(req, dict) or not req.get("uid"):
            raise ValueError("an AdmissionReview needs a request with a uid")
        response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        out = {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
        res = req.get("resource") or {}
        resource, sub = res.get("resource", ""), req.get("subResource") or ""
        is_binding = res.get("group", "") == "" and ((resource, sub) == ("pods", "binding") or
                                                     (resource, sub) == ("bindings", ""))
        if req.get("operation") != "CREATE" or not is_binding:
            return out
        obj = req.get("object") or {}
        md = obj.get("metadata") or {}
        name = req.get("name") or md.get("name") or ""
        namespace = req.get("namespace") or md.get("namespace") or "default"
        node_name = (obj.get("target") or {}).get("name") or ""
        if not name or not node_name:
            return out  # the API server's validation refuses it
        try:
            why = self.check(namespace, name, node_name, dry_run=bool(req.get("dryRun")))
        except ApiError as e:
            # Cannot tell: refuse (the scheduler retries) rather than risk an over-commit.
            why = f"cannot check the binding: {e.message}"
        if why is not None:
            err = BindingConflict.over_commit(name, why)
            response["allowed"] = False
            response["status"] = {"status": "Failure", "code": err.code, "reason": err.reason,
                                  "message": err.message}
        return out

    # ---------------------------------------------------------------- serving

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"message": "the request body is not valid JSON"}, status=400)
        loop = asyncio.get_running_loop()
        try:
            out = await loop.run_in_executor(None, self.review, body)
        except ValueError as e:
            return web.json_response({"message": str(e)}, status=400)
        return web.json_response(out)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def wait_for_sync(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while not all(inf.reflector.listed for inf in self.informers.informers.values()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def start(self) -> None:
        """Start the informers (background) and serve; returns once the socket listens."""
        self._background = True
        self.informers.start()
        self.wait_for_sync()
        with self._lock:
            self.informers.process()

        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/validate", self._handle)
        app.router.add_post("/", self._handle)
        app.router.add_get("/healthz", self._healthz)
        self._server = BackgroundServer(app, self.host, self.port, self.ssl_context, "binding-webhook")
        try:
            self._server.start()
        except BaseException:
            self.informers.stop()
            raise
        self.port = self._server.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        self.informers.stop()
