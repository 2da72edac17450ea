"""GPU sharing: the device-level GPU model in the scheduler, and the FGD paper's policies.

Modules, one concern each: ``shape`` (a pod and a node as the policies see them), ``columns``
(the columnar GPU state of many nodes), ``frag`` (typical pods, fragmentation), ``selection``
(which GPUs a pod gets), ``policy`` (the policy interface), one module per policy (``fgd``,
``bestfit``, ``dotprod``, ``packing``, ``clustering``, ``randomfit``), ``policies`` (by name),
``nodestate`` (NodeInfo -> GPU state, the per-snapshot table, reservations), ``plugin`` (GpuShare:
Filter/Reserve/Bind), ``scoring`` (the policies as Score plugins), ``tracefile`` (shapes from a
trace for FGD's typical pods).
"""
