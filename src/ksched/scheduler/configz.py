"""``/configz``: the scheduler's configuration as kube-scheduler serves it
(``component-base/configz`` with ``cmd/kube-scheduler/app/server.go`` registering
``componentconfig``).

kube-scheduler marshals its *internal* KubeSchedulerConfiguration, a Go type without JSON
tags: fields appear under their Go names (``Parallelism``, ``LeaderElection.LeaseDuration``,
``Profiles[].Plugins.MultiPoint.Enabled[].Weight``, ``PluginConfig[].Args``), durations as Go
writes them (``15s``), empty lists as ``null``, and only ``apiVersion`` of the TypeMeta. The
Kubernetes API types inside plugin args (NodeAffinity's ``addedAffinity``, PodTopologySpread's
``defaultConstraints``) keep their JSON names, as they do upstream.

Known divergences: plugin args are rendered from ksched's defaulted args (the same values;
lists upstream leaves nil may show as ``[]``), and ``Extenders`` is always null (ksched has
no extenders).
"""

from __future__ import annotations

from typing import Any

from ksched.api.duration import format_duration
from ksched.scheduler.config import API_VERSION, EXTENSION_POINTS, PluginSet, Profile, SchedulerConfiguration

__all__ = ["component_config", "go_field_name"]

# JSON names whose Go field name is not the name with its first letter upper-cased.
_GO_NAMES = {"qps": "QPS", "urlPrefix": "URLPrefix", "enableHTTPS": "EnableHTTPS", "httpTimeout": "HTTPTimeout",
             "tlsConfig": "TLSConfig", "caFile": "CAFile", "caData": "CAData"}
# Plugin-arg fields holding core API types (with JSON tags): their contents keep their names.
_API_TYPED = {"addedAffinity", "defaultConstraints"}


def go_field_name(json_name: str) -> str:
    return _GO_NAMES.get(json_name) or json_name[:1].upper() + json_name[1:]


def _go(v: Any) -> Any:
    if isinstance(v, dict):
        return {go_field_name(k): (val if k in _API_TYPED else _go(val)) for k, val in v.items()
                if k not in ("apiVersion", "kind")}
    if isinstance(v, list):
        return [_go(x) for x in v] or None
    return v


def _plugin_set(ps: PluginSet | None) -> dict[str, Any]:
    if ps is None:
        return {"Enabled": None, "Disabled": None}
    return {"Enabled": [{"Name": p.name, "Weight": p.weight} for p in ps.enabled] or None,
            "Disabled": [{"Name": p.name, "Weight": p.weight} for p in ps.disabled] or None}


def _enabled_names(prof: Profile) -> list[str]:
    return sorted({p.name for ps in prof.plugins.values() for p in ps.enabled})


def _profile(prof: Profile, raw: dict[str, Any]) -> dict[str, Any]:
    plugins = {go_field_name(ep): _plugin_set(prof.plugins.get(ep)) for ep in EXTENSION_POINTS}
    plugins["MultiPoint"] = _plugin_set(prof.plugins.get("multiPoint"))
    # The profile's own pluginConfig first, in its order; then upstream's defaulted args of the
    # enabled plugins that have args, by name (setDefaults_KubeSchedulerProfile).
    explicit = [it["name"] for it in raw.get("pluginConfig") or () if isinstance(it, dict) and "name" in it]
    names = explicit + [n for n in _enabled_names(prof) if n in prof.plugin_config and n not in explicit]
    return {
        "SchedulerName": prof.scheduler_name,
        "PercentageOfNodesToScore": prof.percentage_of_nodes_to_score,
        "Plugins": plugins,
        "PluginConfig": [{"Name": n, "Args": _go(prof.plugin_config.get(n) or {})} for n in names] or None,
    }


def component_config(cfg: SchedulerConfiguration, kubeconfig: str | None = None) -> dict[str, Any]:
    """The ``componentconfig`` value of ``/configz`` for ``cfg`` (``kubeconfig``: the file the
    client was built from, when it came from a flag rather than the configuration)."""
    le = cfg.leader_election
    cc = cfg.client_connection
    raw_profiles = [p for p in cfg.raw.get("profiles") or () if isinstance(p, dict)] if cfg.raw else []
    profiles = [_profile(p, raw_profiles[i] if i < len(raw_profiles) else {}) for i, p in enumerate(cfg.profiles)]
    return {
        "apiVersion": API_VERSION,
        "Parallelism": cfg.parallelism,
        "LeaderElection": {
            "LeaderElect": le.leader_elect,
            "LeaseDuration": format_duration(le.lease_duration),
            "RenewDeadline": format_duration(le.renew_deadline),
            "RetryPeriod": format_duration(le.retry_period),
            "ResourceLock": le.resource_lock,
            "ResourceName": le.resource_name,
            "ResourceNamespace": le.resource_namespace,
        },
        "ClientConnection": {
            "Kubeconfig": cc.kubeconfig if kubeconfig is None else kubeconfig,
            "AcceptContentTypes": cc.accept_content_types,
            "ContentType": cc.content_type,
            "QPS": int(cc.qps) if float(cc.qps).is_integer() else cc.qps,  # float32, as Go writes it
            "Burst": cc.burst,
        },
        "EnableProfiling": cfg.enable_profiling,
        "EnableContentionProfiling": cfg.enable_contention_profiling,
        "PercentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "PodInitialBackoffSeconds": int(cfg.pod_initial_backoff_seconds),
        "PodMaxBackoffSeconds": int(cfg.pod_max_backoff_seconds),
        "Profiles": profiles,
        "Extenders": None,
        "DelayCacheUntilActive": cfg.delay_cache_until_active,
    }
