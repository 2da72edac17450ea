"""ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1): the admission webhooks an
API server calls, with the requests each one sees (``staging/src/k8s.io/api/admissionregistration/v1/types.go``;
defaults of ``pkg/apis/admissionregistration/v1/defaults.go``).

Divergences: the embedded API server stores and serves these objects, so that a deployment's
manifests (ksched's own binding webhook among them) apply, but calls no webhook: in ``ksched
serve`` the binding conflict resolver runs in process. MutatingWebhookConfiguration and the
admission policies are not served. The CEL expressions of ``matchConditions`` are stored without
being compiled.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ksched.api.meta import KubeObject

__all__ = ["ValidatingWebhookConfiguration", "default_validating_webhook_configuration"]


class ValidatingWebhookConfiguration(KubeObject):
    KIND: ClassVar[str] = "ValidatingWebhookConfiguration"
    API_VERSION: ClassVar[str] = "admissionregistration.k8s.io/v1"
    PLURAL: ClassVar[str] = "validatingwebhookconfigurations"
    NAMESPACED: ClassVar[bool] = False

    __slots__ = ("webhooks",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.webhooks: list[dict[str, Any]] = raw.get("webhooks") or []


def default_validating_webhook_configuration(raw: dict[str, Any]) -> None:
    """The v1 defaults, in place: failurePolicy Fail, matchPolicy Equivalent, empty namespace and
    object selectors, timeoutSeconds 10, each rule's scope ``*`` and a service's port 443."""
    hooks = raw.get("webhooks")
    for hook in hooks if isinstance(hooks, list) else ():
        if not isinstance(hook, dict):
            continue
        for k, v in (("failurePolicy", "Fail"), ("matchPolicy", "Equivalent"), ("namespaceSelector", {}),
                     ("objectSelector", {}), ("timeoutSeconds", 10)):
            if hook.get(k) is None:  # absent or null, as a nil pointer
                hook[k] = dict(v) if isinstance(v, dict) else v
        rules = hook.get("rules")
        for rule in rules if isinstance(rules, list) else ():
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"
        cc = hook.get("clientConfig")
        if isinstance(cc, dict) and isinstance(cc.get("service"), dict) and cc["service"].get("port") is None:
            cc["service"]["port"] = 443
