"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``): profiles, plugins per
extension point and multiPoint, weights, pluginConfig args, and the global settings (with
leaderElection, clientConnection, the debugging switches and delayCacheUntilActive), with
upstream's defaults and merge rules. Invalid configuration raises :class:`ConfigError` naming
the field.

One rule is ksched's own: ``leaderElection.resourceName`` defaults to ``kube-scheduler`` (the
Lease kube-scheduler elects on) when a profile is ``default-scheduler``, so ksched can replace
kube-scheduler but never schedule beside it; otherwise to ``ksched``. The clientConnection's
contentType, qps and burst are accepted and shown (configz) but not applied: ksched speaks JSON
and does not rate-limit its requests."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ksched.api.duration import DurationError, parse_duration
from ksched.client.leaderelection import LeaderElectionConfiguration

__all__ = [
    "DEFAULT_PLUGINS",
    "EXTENSION_POINTS",
    "ClientConnection",
    "ConfigError",
    "PluginRef",
    "PluginSet",
    "Profile",
    "SchedulerConfiguration",
    "default_configuration",
    "load_configuration",
    "parse_configuration",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
# The Lease of a ksched that schedules no default-scheduler pods (a secondary scheduler).
SECONDARY_LEASE_NAME = "ksched"

EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
                    "reserve", "permit", "preBind", "bind", "postBind")


class ConfigError(ValueError):
    """Invalid scheduler configuration: ``path: message`` for every problem."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = errors
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(prefix + "; ".join(errors))


@dataclass(slots=True)
class PluginRef:
    name: str
    weight: int = 0


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[PluginRef] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: dict[str, PluginSet] = field(default_factory=dict)  # extension point (and "multiPoint")
    plugin_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass(slots=True)
class ClientConnection:
    """component-base's ClientConnectionConfiguration with the scheduler's v1 defaults."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = 100


@dataclass(slots=True)
class SchedulerConfiguration:
    profiles: list[Profile] = field(default_factory=lambda: [Profile()])
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = 1
    pod_max_backoff_seconds: float = 10
    raw: dict[str, Any] = field(default_factory=dict)
    leader_election: LeaderElectionConfiguration = field(default_factory=LeaderElectionConfiguration)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    delay_cache_until_active: bool = False


# Upstream's default profile (apis/config/v1/default_plugins.go, 1.36): all in multiPoint.
DEFAULT_PLUGINS: list[PluginRef] = [
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DynamicResources", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
]

# Default args (apis/config/v1/defaults.go).
DEFAULT_ARGS: dict[str, dict[str, Any]] = {
    "NodeResourcesFit": {
        "ignoredResources": [],
        "ignoredResourceGroups": [],
        "scoringStrategy": {"type": "LeastAllocated",
                            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]},
    },
    "NodeResourcesBalancedAllocation": {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]},
    "InterPodAffinity": {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False},
    "PodTopologySpread": {"defaultConstraints": [], "defaultingType": "System"},
    "DefaultPreemption": {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100},
    "VolumeBinding": {"bindTimeoutSeconds": 600},
    "DynamicResources": {"filterTimeout": 10, "bindingTimeout": 600},
    "NodeAffinity": {},
}


def _plugin_set(d: Any, path: str, errors: list[str]) -> PluginSet:
    ps = PluginSet()
    if d is None:
        return ps
    if not isinstance(d, dict):
        errors.append(f"{path}: must be an object with enabled/disabled")
        return ps
    for part in ("enabled", "disabled"):
        items = d.get(part) or []
        if not isinstance(items, list):
            errors.append(f"{path}.{part}: must be a list")
            continue
        for i, it in enumerate(items):
            p = f"{path}.{part}[{i}]"
            if not isinstance(it, dict) or not isinstance(it.get("name"), str) or not it.get("name"):
                errors.append(f"{p}.name: Required value")
                continue
            w = it.get("weight", 0)
            if w is None:
                w = 0
            if isinstance(w, bool) or not isinstance(w, int):
                errors.append(f"{p}.weight: Invalid value: {w!r}: must be an integer")
                w = 0
            elif w < 0:
                errors.append(f"{p}.weight: Invalid value: {w}: must be non-negative")
            getattr(ps, part).append(PluginRef(it["name"], int(w)))
    return ps


def _merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream's mergePluginSet: defaults minus disabled (all with ``*``), custom-enabled
    plugins replacing a default in place, the rest appended."""
    disabled = {p.name for p in custom.disabled} | {p.name for p in default.disabled}
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for dp in default.enabled:
            if dp.name in disabled:
                continue
            if dp.name in custom_by_name:
                i, cp = custom_by_name[dp.name]
                replaced.add(i)
                enabled.append(PluginRef(cp.name, cp.weight))
            else:
                enabled.append(PluginRef(dp.name, dp.weight))
    for i, cp in enumerate(custom.enabled):
        if i not in replaced:
            enabled.append(PluginRef(cp.name, cp.weight))
    return PluginSet(enabled, [PluginRef(p.name) for p in custom.disabled] + [PluginRef(p.name) for p in default.disabled])


def _validate_args(name: str, args: dict[str, Any], path: str, errors: list[str]) -> None:
    if name == "NodeResourcesFit":
        ss = args.get("scoringStrategy") or {}
        t = ss.get("type")
        if t not in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"):
            errors.append(f'{path}.scoringStrategy.type: Unsupported value: "{t}": supported values: '
                          '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"')
        for i, r in enumerate(ss.get("resources") or []):
            w = r.get("weight", 1) if isinstance(r, dict) else None
            if not isinstance(w, int) or isinstance(w, bool) or w < 1 or w > 100:
                errors.append(f"{path}.scoringStrategy.resources[{i}].weight: Invalid value: {w!r}: "
                              "resource weight of cpu should be in the range of 1-100"
                              if isinstance(r, dict) and r.get("name") == "cpu" else
                              f"{path}.scoringStrategy.resources[{i}].weight: Invalid value: {w!r}: must be in the "
                              "range 1-100")
        if t == "RequestedToCapacityRatio":
            shape = (ss.get("requestedToCapacityRatio") or {}).get("shape") or []
            if not shape:
                errors.append(f"{path}.scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one "
                              "point must be specified")
            last = -1
            for i, pt in enumerate(shape):
                u = pt.get("utilization") if isinstance(pt, dict) else None
                s = pt.get("score") if isinstance(pt, dict) else None
                if not isinstance(u, int) or u < 0 or u > 100:
                    errors.append(f"{path}.scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: "
                                  f"Invalid value: {u!r}: must be in the range [0, 100]")
                elif u <= last:
                    errors.append(f"{path}.scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: "
                                  f"Invalid value: {u}: utilization values must be sorted in increasing order")
                else:
                    last = u
                if not isinstance(s, int) or s < 0 or s > 10:
                    errors.append(f"{path}.scoringStrategy.requestedToCapacityRatio.shape[{i}].score: "
                                  f"Invalid value: {s!r}: must be in the range [0, 10]")
    elif name == "NodeResourcesBalancedAllocation":
        for i, r in enumerate(args.get("resources") or []):
            w = r.get("weight", 1) if isinstance(r, dict) else None
            if not isinstance(w, int) or w != 1:
                errors.append(f"{path}.resources[{i}].weight: Invalid value: {w!r}: must be 1")
    elif name == "InterPodAffinity":
        w = args.get("hardPodAffinityWeight")
        if not isinstance(w, int) or w < 0 or w > 100:
            errors.append(f"{path}.hardPodAffinityWeight: Invalid value: {w!r}: not in valid range [0-100]")
    elif name == "DefaultPreemption":
        p = args.get("minCandidateNodesPercentage")
        a = args.get("minCandidateNodesAbsolute")
        if not isinstance(p, int) or p < 0 or p > 100:
            errors.append(f"{path}.minCandidateNodesPercentage: Invalid value: {p!r}: not in valid range [0, 100]")
        if not isinstance(a, int) or a < 0:
            errors.append(f"{path}.minCandidateNodesAbsolute: Invalid value: {a!r}: not in valid range [0, inf)")
        if p == 0 and a == 0:
            errors.append(f"{path}: Invalid value: both minCandidateNodesPercentage and "
                          "minCandidateNodesAbsolute cannot be zero")
    elif name == "PodTopologySpread":
        dt = args.get("defaultingType")
        if dt not in ("System", "List"):
            errors.append(f'{path}.defaultingType: Unsupported value: "{dt}": supported values: "List", "System"')
        dcs = args.get("defaultConstraints") or []
        if dt == "System" and dcs:
            errors.append(f"{path}.defaultConstraints: Invalid value: when .defaultingType is \"System\", "
                          ".defaultConstraints must be empty")
        for i, c in enumerate(dcs):
            if not isinstance(c, dict):
                errors.append(f"{path}.defaultConstraints[{i}]: must be an object")
                continue
            if not isinstance(c.get("maxSkew"), int) or c.get("maxSkew", 0) <= 0:
                errors.append(f"{path}.defaultConstraints[{i}].maxSkew: Invalid value: {c.get('maxSkew')!r}: "
                              "must be greater than zero")
            if not c.get("topologyKey"):
                errors.append(f"{path}.defaultConstraints[{i}].topologyKey: Required value: can not be empty")
            if c.get("whenUnsatisfiable") not in ("DoNotSchedule", "ScheduleAnyway"):
                errors.append(f"{path}.defaultConstraints[{i}].whenUnsatisfiable: Unsupported value: "
                              f"\"{c.get('whenUnsatisfiable')}\"")
            if c.get("labelSelector") is not None:
                errors.append(f"{path}.defaultConstraints[{i}].labelSelector: Forbidden: constraint must not define "
                              "a selector, as they deduced for each pod")
    elif name == "VolumeBinding":
        t = args.get("bindTimeoutSeconds")
        if not isinstance(t, int) or t < 0:
            errors.append(f"{path}.bindTimeoutSeconds: Invalid value: {t!r}: invalid BindTimeoutSeconds, should "
                          "not be a negative value")


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_configuration(raw: Any, source: str = "") -> SchedulerConfiguration:
    errors: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(["configuration must be a YAML object"], source)
    av = raw.get("apiVersion")
    kind = raw.get("kind")
    if av is not None and av != API_VERSION:
        errors.append(f'apiVersion: Unsupported value: "{av}": supported values: "{API_VERSION}"')
    if kind is not None and kind != KIND:
        errors.append(f'kind: Unsupported value: "{kind}": supported values: "{KIND}"')
    cfg = SchedulerConfiguration(raw=raw)

    def num(key: str, default: Any, lo: float | None, hi: float | None) -> Any:
        v = raw.get(key, default)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int | float):
            errors.append(f"{key}: Invalid value: {v!r}: must be a number")
            return default
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = f"[{lo}, {hi}]" if hi is not None else f"greater than or equal to {lo}"
            errors.append(f"{key}: Invalid value: {v}: not in valid range {rng}")
        return v

    cfg.parallelism = num("parallelism", 16, 1, None)
    cfg.percentage_of_nodes_to_score = num("percentageOfNodesToScore", 0, 0, 100)
    cfg.pod_initial_backoff_seconds = num("podInitialBackoffSeconds", 1, 0, None)
    cfg.pod_max_backoff_seconds = num("podMaxBackoffSeconds", 10, 0, None)
    if raw.get("podInitialBackoffSeconds") is not None and cfg.pod_initial_backoff_seconds <= 0:
        errors.append(f"podInitialBackoffSeconds: Invalid value: {cfg.pod_initial_backoff_seconds}: must be greater "
                      "than 0")
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        errors.append(f"podMaxBackoffSeconds: Invalid value: {cfg.pod_max_backoff_seconds}: must be greater than or "
                      "equal to PodInitialBackoffSeconds")
    profiles_raw = raw.get("profiles")
    if profiles_raw is None:
        profiles_raw = [{}]
    if not isinstance(profiles_raw, list) or not profiles_raw:
        errors.append("profiles: Required value: must have at least one profile")
        profiles_raw = [{}]
    profiles: list[Profile] = []
    names: set[str] = set()
    default_set = PluginSet([PluginRef(p.name, p.weight) for p in DEFAULT_PLUGINS])
    for i, pr in enumerate(profiles_raw):
        path = f"profiles[{i}]"
        if not isinstance(pr, dict):
            errors.append(f"{path}: must be an object")
            continue
        prof = Profile()
        sn = pr.get("schedulerName", DEFAULT_SCHEDULER_NAME)
        if not isinstance(sn, str) or not sn:
            errors.append(f"{path}.schedulerName: Required value")
            sn = DEFAULT_SCHEDULER_NAME
        if sn in names:
            errors.append(f'{path}.schedulerName: Duplicate value: "{sn}"')
        names.add(sn)
        prof.scheduler_name = sn
        pct = pr.get("percentageOfNodesToScore")
        if pct is not None:
            if not isinstance(pct, int) or pct < 0 or pct > 100:
                errors.append(f"{path}.percentageOfNodesToScore: Invalid value: {pct!r}: not in valid range [0, 100]")
            else:
                prof.percentage_of_nodes_to_score = pct
        plugins_raw = pr.get("plugins") or {}
        if not isinstance(plugins_raw, dict):
            errors.append(f"{path}.plugins: must be an object")
            plugins_raw = {}
        for k in plugins_raw:
            if k not in EXTENSION_POINTS and k != "multiPoint":
                errors.append(f'{path}.plugins.{k}: unknown extension point "{k}"')
        custom = {ep: _plugin_set(plugins_raw.get(ep), f"{path}.plugins.{ep}", errors)
                  for ep in (*EXTENSION_POINTS, "multiPoint")}
        prof.plugins = {ep: _merge_plugin_set(PluginSet(), custom[ep]) for ep in EXTENSION_POINTS}
        prof.plugins["multiPoint"] = _merge_plugin_set(default_set, custom["multiPoint"])
        # Default args, then the profile's pluginConfig over them.
        pc = {k: copy.deepcopy(v) for k, v in DEFAULT_ARGS.items()}
        seen: set[str] = set()
        for j, item in enumerate(pr.get("pluginConfig") or []):
            ipath = f"{path}.pluginConfig[{j}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                errors.append(f"{ipath}.name: Required value")
                continue
            name = item["name"]
            if name in seen:
                errors.append(f'{ipath}: Duplicate value: "{name}"')
            seen.add(name)
            args = item.get("args") or {}
            if not isinstance(args, dict):
                errors.append(f"{ipath}.args: must be an object")
                continue
            args = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
            base = pc.get(name, {})
            if name == "NodeResourcesFit" and "scoringStrategy" in args:
                merged = _deep_merge(base, {k: v for k, v in args.items() if k != "scoringStrategy"})
                ss = dict(args["scoringStrategy"] or {})
                ss.setdefault("type", "LeastAllocated")
                ss.setdefault("resources", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}])
                merged["scoringStrategy"] = ss
            else:
                merged = {**base, **args}
            pc[name] = merged
        for name, args in pc.items():
            j = next((k for k, it in enumerate(pr.get("pluginConfig") or []) if isinstance(it, dict)
                      and it.get("name") == name), None)
            if j is not None:
                _validate_args(name, args, f"{path}.pluginConfig[{j}].args", errors)
        prof.plugin_config = pc
        profiles.append(prof)
    qs = [_queue_sort_names(p) for p in profiles]
    if len({tuple(q) for q in qs}) > 1:
        errors.append("profiles[1].plugins.queueSort: Invalid value: queueSort must be the same for all profiles")
    cfg.leader_election = _leader_election(raw.get("leaderElection"), profiles, errors)
    cfg.client_connection = _client_connection(raw.get("clientConnection"), errors)
    for key, attr in (("enableProfiling", "enable_profiling"), ("enableContentionProfiling",
                                                                "enable_contention_profiling"),
                      ("delayCacheUntilActive", "delay_cache_until_active")):
        v = raw.get(key)
        if v is None:
            continue
        if not isinstance(v, bool):
            errors.append(f"{key}: Invalid value: {v!r}: must be a boolean")
            continue
        setattr(cfg, attr, v)
    if errors:
        raise ConfigError(errors, source)
    cfg.profiles = profiles
    return cfg


def default_lease_name(profiles: list[Profile]) -> str:
    """kube-scheduler's Lease when a profile schedules default-scheduler pods, else ksched's."""
    if any(p.scheduler_name == DEFAULT_SCHEDULER_NAME for p in profiles):
        return "kube-scheduler"
    return SECONDARY_LEASE_NAME


def _leader_election(d: Any, profiles: list[Profile], errors: list[str]) -> LeaderElectionConfiguration:
    le = LeaderElectionConfiguration(resource_name=default_lease_name(profiles or [Profile()]))
    if d is None:
        return le
    path = "leaderElection"
    if not isinstance(d, dict):
        errors.append(f"{path}: must be an object")
        return le
    v = d.get("leaderElect")
    if v is not None:
        if isinstance(v, bool):
            le.leader_elect = v
        else:
            errors.append(f"{path}.leaderElect: Invalid value: {v!r}: must be a boolean")
    for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                      ("retryPeriod", "retry_period")):
        v = d.get(key)
        if v is None:
            continue
        try:
            if not isinstance(v, str):
                raise DurationError('must be a duration string such as "15s"')
            setattr(le, attr, parse_duration(v))
        except DurationError as e:
            errors.append(f"{path}.{key}: Invalid value: {json.dumps(v)}: {e}")
    for key, attr in (("resourceLock", "resource_lock"), ("resourceName", "resource_name"),
                      ("resourceNamespace", "resource_namespace")):
        v = d.get(key)
        if v is None:
            continue
        if not isinstance(v, str):
            errors.append(f"{path}.{key}: Invalid value: {v!r}: must be a string")
            continue
        setattr(le, attr, v)
    errors.extend(le.validate(path))
    return le


def _client_connection(d: Any, errors: list[str]) -> ClientConnection:
    cc = ClientConnection()
    if d is None:
        return cc
    path = "clientConnection"
    if not isinstance(d, dict):
        errors.append(f"{path}: must be an object")
        return cc
    for key, attr in (("kubeconfig", "kubeconfig"), ("acceptContentTypes", "accept_content_types"),
                      ("contentType", "content_type")):
        v = d.get(key)
        if v is None:
            continue
        if not isinstance(v, str):
            errors.append(f"{path}.{key}: Invalid value: {v!r}: must be a string")
            continue
        setattr(cc, attr, v)
    qps = d.get("qps")
    if qps is not None:
        if isinstance(qps, bool) or not isinstance(qps, int | float):
            errors.append(f"{path}.qps: Invalid value: {qps!r}: must be a number")
        else:
            cc.qps = float(qps)
    burst = d.get("burst")
    if burst is not None:
        if isinstance(burst, bool) or not isinstance(burst, int):
            errors.append(f"{path}.burst: Invalid value: {burst!r}: must be an integer")
        elif burst < 0:
            errors.append(f"{path}.burst: Invalid value: {burst}: must be non-negative")
        else:
            cc.burst = burst
    return cc


def _queue_sort_names(p: Profile) -> list[str]:
    explicit = [x.name for x in p.plugins["queueSort"].enabled]
    if explicit:
        return explicit
    return [x.name for x in p.plugins["multiPoint"].enabled if x.name == "PrioritySort"]


def default_configuration() -> SchedulerConfiguration:
    return parse_configuration({})


def load_configuration(path: str | Path) -> SchedulerConfiguration:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([f"cannot read: {e}"], str(p)) from e
    import yaml  # only here: ``ksched run`` without --config starts without it

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError([f"invalid YAML: {e}"], str(p)) from e
    return parse_configuration(raw, str(p))
