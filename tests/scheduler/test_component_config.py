"""The component part of KubeSchedulerConfiguration: leaderElection (upstream's defaults and
validation, and ksched's rule for the Lease: kube-scheduler's when a profile is
default-scheduler), clientConnection, the debugging switches, delayCacheUntilActive; and
/configz as kube-scheduler renders its internal configuration."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.scheduler.config import ConfigError, parse_configuration
from ksched.scheduler.configz import component_config, go_field_name


def _cfg(**raw: Any) -> Any:
    return parse_configuration({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                **raw})


@pytest.mark.parametrize(("profiles", "lease"), [
    (None, "kube-scheduler"),
    ([{"schedulerName": "default-scheduler"}], "kube-scheduler"),
    ([{"schedulerName": "batch"}, {"schedulerName": "default-scheduler"}], "kube-scheduler"),
    ([{"schedulerName": "batch"}], "ksched"),
    ([{"schedulerName": "batch"}, {"schedulerName": "gpu"}], "ksched"),
])
def test_the_lease_follows_the_profiles(profiles: Any, lease: str) -> None:
    cfg = _cfg(**({"profiles": profiles} if profiles is not None else {}))
    le = cfg.leader_election
    assert (le.leader_elect, le.resource_name, le.resource_namespace, le.resource_lock) == (
        True, lease, "kube-system", "leases")
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)


def test_leader_election_as_written() -> None:
    cfg = _cfg(profiles=[{"schedulerName": "default-scheduler"}],
               leaderElection={"leaderElect": False, "leaseDuration": "1m", "renewDeadline": "30s",
                               "retryPeriod": "2.5s", "resourceName": "mine", "resourceNamespace": "sched"})
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (False, 60.0, 30.0, 2.5)
    assert (le.resource_name, le.resource_namespace) == ("mine", "sched")


@pytest.mark.parametrize(("raw", "errors"), [
    ({"leaderElection": {"leaseDuration": "10s"}},
     ["leaderElection.leaseDuration: Invalid value: 10s: LeaseDuration must be greater than RenewDeadline"]),
    ({"leaderElection": {"retryPeriod": "0s"}},
     ["leaderElection.retryPeriod: Invalid value: 0s: must be greater than zero"]),
    ({"leaderElection": {"renewDeadline": "10"}},
     ['leaderElection.renewDeadline: Invalid value: "10": time: missing unit in duration "10"']),
    ({"leaderElection": {"leaseDuration": 15}},
     ['leaderElection.leaseDuration: Invalid value: 15: must be a duration string such as "15s"']),
    ({"leaderElection": {"resourceLock": "configmaps"}},
     ['leaderElection.resourceLock: Unsupported value: "configmaps": supported values: "leases"']),
    ({"leaderElection": {"resourceName": ""}},
     ['leaderElection.resourceName: Invalid value: "": resourceName is required']),
    ({"leaderElection": {"leaderElect": False, "resourceName": "", "leaseDuration": "1s"}}, []),
    ({"leaderElection": {"leaderElect": "yes"}},
     ["leaderElection.leaderElect: Invalid value: 'yes': must be a boolean"]),
    ({"clientConnection": {"burst": -1, "qps": "fast"}},
     ["clientConnection.qps: Invalid value: 'fast': must be a number",
      "clientConnection.burst: Invalid value: -1: must be non-negative"]),
    ({"delayCacheUntilActive": "no"}, ["delayCacheUntilActive: Invalid value: 'no': must be a boolean"]),
])
def test_component_sections_are_validated(raw: dict[str, Any], errors: list[str]) -> None:
    if not errors:
        _cfg(**raw)
        return
    with pytest.raises(ConfigError) as ei:
        _cfg(**raw)
    assert ei.value.errors == errors


def test_client_connection_and_switches() -> None:
    cfg = _cfg(clientConnection={"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 100, "burst": 200,
                                 "contentType": "application/json"},
               enableProfiling=False, delayCacheUntilActive=True)
    cc = cfg.client_connection
    assert (cc.kubeconfig, cc.qps, cc.burst, cc.content_type) == ("/etc/kubernetes/scheduler.conf", 100.0, 200,
                                                                  "application/json")
    assert (cfg.enable_profiling, cfg.enable_contention_profiling, cfg.delay_cache_until_active) == (
        False, True, True)
    d = _cfg()
    assert (d.client_connection.qps, d.client_connection.burst, d.client_connection.content_type) == (
        50.0, 100, "application/vnd.kubernetes.protobuf")


@pytest.mark.parametrize(("json_name", "go_name"), [
    ("parallelism", "Parallelism"), ("qps", "QPS"), ("kubeconfig", "Kubeconfig"),
    ("minCandidateNodesPercentage", "MinCandidateNodesPercentage"), ("urlPrefix", "URLPrefix"),
    ("enableHTTPS", "EnableHTTPS"), ("tlsConfig", "TLSConfig"),
])
def test_go_field_names(json_name: str, go_name: str) -> None:
    assert go_field_name(json_name) == go_name


def test_configz_renders_the_internal_configuration() -> None:
    cfg = _cfg(profiles=[{"schedulerName": "default-scheduler",
                          "plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"}]},
                                      "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
                          "pluginConfig": [
                              {"name": "PodTopologySpread", "args": {
                                  "defaultingType": "List",
                                  "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                          "whenUnsatisfiable": "ScheduleAnyway"}]}}]}],
               leaderElection={"leaseDuration": "90s"})
    cz = component_config(cfg, kubeconfig="/kc")
    assert cz["apiVersion"] == "kubescheduler.config.k8s.io/v1" and "kind" not in cz
    assert list(cz) == ["apiVersion", "Parallelism", "LeaderElection", "ClientConnection", "EnableProfiling",
                        "EnableContentionProfiling", "PercentageOfNodesToScore", "PodInitialBackoffSeconds",
                        "PodMaxBackoffSeconds", "Profiles", "Extenders", "DelayCacheUntilActive"]
    assert cz["LeaderElection"]["LeaseDuration"] == "1m30s" and cz["LeaderElection"]["RenewDeadline"] == "10s"
    assert cz["ClientConnection"] == {"Kubeconfig": "/kc", "AcceptContentTypes": "",
                                      "ContentType": "application/vnd.kubernetes.protobuf", "QPS": 50, "Burst": 100}
    prof = cz["Profiles"][0]
    assert prof["PercentageOfNodesToScore"] is None
    assert list(prof["Plugins"]) == ["PreEnqueue", "QueueSort", "PreFilter", "Filter", "PostFilter", "PreScore",
                                     "Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind", "MultiPoint"]
    assert prof["Plugins"]["Filter"] == {"Enabled": None, "Disabled": None}
    assert prof["Plugins"]["Score"]["Enabled"] == [{"Name": "NodeResourcesFit", "Weight": 5}]
    mp = prof["Plugins"]["MultiPoint"]
    assert mp["Disabled"] == [{"Name": "ImageLocality", "Weight": 0}]
    assert {"Name": "TaintToleration", "Weight": 3} in mp["Enabled"]
    assert all(p["Name"] != "ImageLocality" for p in mp["Enabled"])
    # The profile's own args first, then the defaulted ones of enabled plugins, by name.
    names = [pc["Name"] for pc in prof["PluginConfig"]]
    assert names == ["PodTopologySpread", "DefaultPreemption", "DynamicResources", "InterPodAffinity", "NodeAffinity",
                     "NodeResourcesBalancedAllocation", "NodeResourcesFit", "VolumeBinding"]
    pts = prof["PluginConfig"][0]["Args"]
    assert pts == {"DefaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
                   "DefaultingType": "List"}
    dp = prof["PluginConfig"][1]["Args"]
    assert dp == {"MinCandidateNodesPercentage": 10, "MinCandidateNodesAbsolute": 100}
    fit = prof["PluginConfig"][6]["Args"]
    assert fit["ScoringStrategy"] == {"Type": "LeastAllocated", "Resources": [{"Name": "cpu", "Weight": 1},
                                                                              {"Name": "memory", "Weight": 1}]}
