"""The kubelet's resource managers (upstream ``pkg/kubelet/cm``): the node's NUMA layout
(``topology``), the CPU manager's static policy (``cpumanager``), the topology manager
(``topologymanager``) and the device plugin manager (``devicemanager``), put together per node
by ``container_manager``."""
