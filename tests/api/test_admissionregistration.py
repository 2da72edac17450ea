"""ValidatingWebhookConfiguration: upstream's v1 defaults and the errors of its create-time
validation (``pkg/apis/admissionregistration/validation``), field path and message as upstream
words them; served through the API server with defaults filled in and bad input refused whole."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ksched.api.admissionregistration import (
    ValidatingWebhookConfiguration,
    default_validating_webhook_configuration,
)
from ksched.api.errors import Invalid
from ksched.api.kinds import parse_object
from ksched.api.validation import validate
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


def hook(**over: Any) -> dict[str, Any]:
    h: dict[str, Any] = {
        "name": "binding.ksched.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}],
        "clientConfig": {"service": {"name": "ksched-webhook", "namespace": "kube-system", "path": "/validate"}},
    }
    h.update(over)
    return {k: v for k, v in h.items() if v is not None}


def config(*hooks: dict[str, Any], name: str = "conflicts") -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": list(hooks)}


def errors(raw: dict[str, Any]) -> list[tuple[str, str]]:
    default_validating_webhook_configuration(raw)
    return [(e.path, e.message) for e in validate(raw)]


def test_defaults() -> None:
    raw = config(hook(), hook(name="url.ksched.io", clientConfig={"url": "https://example.com/x"},
                          failurePolicy="Ignore", timeoutSeconds=3))
    default_validating_webhook_configuration(raw)
    first, second = raw["webhooks"]
    assert {k: first[k] for k in ("failurePolicy", "matchPolicy", "namespaceSelector", "objectSelector",
                                  "timeoutSeconds")} == {"failurePolicy": "Fail", "matchPolicy": "Equivalent",
                                                         "namespaceSelector": {}, "objectSelector": {},
                                                         "timeoutSeconds": 10}
    assert first["rules"][0]["scope"] == "*" and first["clientConfig"]["service"]["port"] == 443
    assert (second["failurePolicy"], second["timeoutSeconds"]) == ("Ignore", 3)
    assert "service" not in second["clientConfig"]
    first["namespaceSelector"]["matchLabels"] = {"a": "b"}
    assert second["namespaceSelector"] == {}  # each webhook its own selector
    assert errors(raw) == []
    obj = parse_object(raw)
    assert isinstance(obj, ValidatingWebhookConfiguration) and [h["name"] for h in obj.webhooks] == [
        "binding.ksched.io", "url.ksched.io"]


# (what, the webhook's fields changed, the errors expected: field path, message)
CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("name not fully qualified", {"name": "binding.ksched"},
     [("webhooks[0].name", 'Invalid value: "binding.ksched": should be a domain with at least three segments '
                           "separated by dots")]),
    ("name missing", {"name": ""}, [("webhooks[0].name", "Required value")]),
    ("side effects missing", {"sideEffects": None},
     [("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun")]),
    ("side effects a v1beta1 class", {"sideEffects": "Unknown"},
     [("webhooks[0].sideEffects", 'Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"')]),
    ("no review version", {"admissionReviewVersions": []},
     [("webhooks[0].admissionReviewVersions", "Required value: must specify one of v1, v1beta1")]),
    ("no known review version", {"admissionReviewVersions": ["v2"]},
     [("webhooks[0].admissionReviewVersions", "Invalid value: list: must include at least one of v1, v1beta1")]),
    ("duplicate review version", {"admissionReviewVersions": ["v1", "v1"]},
     [("webhooks[0].admissionReviewVersions[1]", 'Invalid value: "v1": duplicate version')]),
    ("failure policy", {"failurePolicy": "Retry"},
     [("webhooks[0].failurePolicy", 'Unsupported value: "Retry": supported values: "Fail", "Ignore"')]),
    ("match policy", {"matchPolicy": "Loose"},
     [("webhooks[0].matchPolicy", 'Unsupported value: "Loose": supported values: "Equivalent", "Exact"')]),
    ("timeout", {"timeoutSeconds": 31},
     [("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds")]),
    ("both url and service", {"clientConfig": {"url": "https://a.example", "service": {"name": "s", "namespace": "n"}}},
     [("webhooks[0].clientConfig", "Required value: exactly one of url or service is required")]),
    ("neither url nor service", {"clientConfig": {}},
     [("webhooks[0].clientConfig", "Required value: exactly one of url or service is required")]),
    ("plain http url", {"clientConfig": {"url": "http://a.example/x"}},
     [("webhooks[0].clientConfig.url", 'Invalid value: "http": \'https\' is the only allowed URL scheme; '
                                       "desired format: https://host[/path]")]),
    ("url with user, query and fragment", {"clientConfig": {"url": "https://u:p@a.example/x?y=1#z"}},
     [("webhooks[0].clientConfig.url", 'Invalid value: "u:p": user information is not permitted in the URL'),
      ("webhooks[0].clientConfig.url", 'Invalid value: "z": fragments are not permitted in the URL'),
      ("webhooks[0].clientConfig.url", 'Invalid value: "y=1": query parameters are not permitted in the URL')]),
    ("service without name and namespace, bad port", {"clientConfig": {"service": {"port": 70000}}},
     [("webhooks[0].clientConfig.service.name", "Required value: service name is required"),
      ("webhooks[0].clientConfig.service.namespace", "Required value: service namespace is required"),
      ("webhooks[0].clientConfig.service.port",
       "Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive")]),
    ("service name not a string", {"clientConfig": {"service": {"name": 5, "namespace": "n"}}},
     [("webhooks[0].clientConfig.service.name", "Invalid value: 5: must be a string")]),
    ("service path", {"clientConfig": {"service": {"name": "s", "namespace": "n", "path": "validate//x"}}},
     [("webhooks[0].clientConfig.service.path", 'Invalid value: "validate//x": must start with a \'/\''),
      ("webhooks[0].clientConfig.service.path", 'Invalid value: "validate//x": segment[1] may not be empty')]),
    ("rule without operations, groups, versions, resources", {"rules": [{}]},
     [("webhooks[0].rules[0].operations", "Required value"), ("webhooks[0].rules[0].apiGroups", "Required value"),
      ("webhooks[0].rules[0].apiVersions", "Required value"), ("webhooks[0].rules[0].resources", "Required value")]),
    ("rule operations", {"rules": [{"operations": ["*", "PATCH"], "apiGroups": ["*"], "apiVersions": ["*"],
                                    "resources": ["*"], "scope": "Global"}]},
     [("webhooks[0].rules[0].operations", "Invalid value: list: if '*' is present, must not specify other operations"),
      ("webhooks[0].rules[0].operations[1]",
       'Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"'),
      ("webhooks[0].rules[0].scope", 'Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced"')]),
    ("rule wildcards", {"rules": [{"operations": ["CREATE"], "apiGroups": ["*", "apps"], "apiVersions": ["v1", ""],
                                   "resources": ["*/*", "pods/*", "pods/status", "*", "pods"]}]},
     [("webhooks[0].rules[0].apiGroups", "Invalid value: list: if '*' is present, must not specify other API groups"),
      ("webhooks[0].rules[0].apiVersions[1]", "Required value"),
      ("webhooks[0].rules[0].resources[1]", 'Invalid value: "pods/*": if \'*/*\' is present, must not specify pods/*'),
      ("webhooks[0].rules[0].resources[2]", 'Invalid value: "pods/status": if \'pods/*\' is present, must not '
                                            "specify pods/status"),
      ("webhooks[0].rules[0].resources", "Invalid value: list: if '*/*' is present, must not specify other resources"),
      ("webhooks[0].rules[0].resources",
       "Invalid value: list: if '*' is present, must not specify other resources without subresources")]),
    ("selector", {"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
     [("webhooks[0].objectSelector.matchExpressions[0].operator",
       'Unsupported value: "Near": supported values: "In", "NotIn", "Exists", "DoesNotExist"')]),
    ("match conditions", {"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a"}, {"expression": "x"}]},
     [("webhooks[0].matchConditions[1].name", 'Duplicate value: "a"'),
      ("webhooks[0].matchConditions[1].expression", "Required value"),
      ("webhooks[0].matchConditions[2].name", "Required value")]),
]


@pytest.mark.parametrize(("what", "fields", "expected"), CASES, ids=[c[0] for c in CASES])
def test_validation(what: str, fields: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert errors(config(hook(**fields))) == expected


def test_webhook_names_are_unique_and_metadata_checked() -> None:
    assert errors(config(hook(), hook(), name="Bad_Name")) == [
        ("metadata.name", 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
                          "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
        ("webhooks[1].name", 'Duplicate value: "binding.ksched.io"')]


@pytest.mark.parametrize("junk", [None, 3, "x", [1], {"rules": 5}, {"clientConfig": []}])
def test_odd_input_is_an_error_not_a_crash(junk: Any) -> None:
    raw = config(junk)  # type: ignore[arg-type]
    default_validating_webhook_configuration(raw)
    assert validate(raw) != []


def test_the_store_defaults_and_refuses_whole() -> None:
    store = Store(VirtualClock())
    created = store.create(parse_object(config(hook())))
    assert created.raw["webhooks"][0]["timeoutSeconds"] == 10
    bad = config(hook(), hook(name="other.ksched.io", timeoutSeconds=0))
    with pytest.raises(Invalid) as e:
        store.create(parse_object(copy.deepcopy(bad) | {"metadata": {"name": "bad"}}))
    assert "webhooks[1].timeoutSeconds" in str(e.value)
    assert [o.name for o in store.list("ValidatingWebhookConfiguration")[0]] == ["conflicts"]
