"""The admitted pods' request sums read per template (``admitted.template_requests``,
``admitted.TEMPLATE_REQUESTS``) against ``pod_requests`` of each pod (the reference): replicas
of a few templates (``Pod.like``: the parsed containers, init containers, overhead and pod-level
requests shared), pods parsed on their own, pods given another overhead or pod-level requests
with a template's containers, in any order: the same sums; and a node's kept sum equals the
reference's after the same puts and discards."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.api.resources import pod_requests
from ksched.kubelet import admitted
from ksched.kubelet.admitted import AdmittedPods

_amount = st.sampled_from(["0", "1", "250m", "1Gi"])
_res = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/dev", "hugepages-2Mi"]), _amount, max_size=3)
_templates = st.tuples(st.lists(_res, min_size=1, max_size=2), st.lists(_res, max_size=2),
                       st.one_of(st.just({}), _res), st.one_of(st.just({}), _res))


def _raw(name: str, containers: list[dict[str, str]], inits: list[dict[str, str]], overhead: dict[str, str],
         pod_level: dict[str, str], node: str = "n1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": f"c{i}", "image": "i", "resources": {"requests": dict(r)}}
                       for i, r in enumerate(containers)],
    }
    if inits:
        spec["initContainers"] = [{"name": f"i{i}", "image": "i", "resources": {"requests": dict(r)}}
                                  for i, r in enumerate(inits)]
    if overhead:
        spec["overhead"] = dict(overhead)
    if pod_level:
        spec["resources"] = {"requests": dict(pod_level)}
    return {"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"},
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


@settings(max_examples=200, deadline=None)
@given(st.lists(_templates, min_size=3, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 0, 1, 2, 3]), st.booleans()), min_size=1,
                max_size=25))
def test_template_requests_are_pod_requests(templates: list[tuple[Any, ...]], steps: list[tuple[int, int, bool]]
                                            ) -> None:
    admitted._templates.clear()  # (a bounded module-level memo: each example starts empty)
    bases = [Pod(_raw(f"t{i}", *t)) for i, t in enumerate(templates)]
    fast, ref = AdmittedPods(lambda p: True), AdmittedPods(lambda p: True)
    for i, (which, how, discard) in enumerate(steps):
        containers, inits, overhead, pod_level = templates[which]
        if how == 0:
            pod = bases[which].like(_raw(f"p{i % 6}", containers, inits, overhead, pod_level))
        elif how == 1:
            pod = Pod(_raw(f"p{i % 6}", containers, inits, overhead, pod_level))
        elif how == 2:  # the template's containers, another overhead
            pod = bases[which].like(_raw(f"p{i % 6}", containers, inits, {"cpu": "3"}, pod_level))
            pod.overhead = {"cpu": 3000}
        else:  # the template's containers, other pod-level requests
            pod = bases[which].like(_raw(f"p{i % 6}", containers, inits, overhead, {"memory": "2Gi"}))
            pod.pod_level_requests = {"memory": 2 * 2**30}
        assert admitted.template_requests(pod) == pod_requests(Pod(pod.raw), cache=False)
        for kept, flag in ((fast, True), (ref, False)):
            saved = admitted.TEMPLATE_REQUESTS
            admitted.TEMPLATE_REQUESTS = flag
            try:
                # (the reference its own copy: its put caches the requests on the pod, which the
                # fast path would then read instead of its template memo)
                kept.discard(pod.key) if discard else kept.put(pod if flag else Pod(pod.raw))
            finally:
                admitted.TEMPLATE_REQUESTS = saved
        assert fast.requested("n1") == ref.requested("n1")
        assert fast.count("n1") == ref.count("n1")
