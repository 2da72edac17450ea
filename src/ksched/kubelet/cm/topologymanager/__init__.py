"""The topology manager (upstream ``pkg/kubelet/cm/topologymanager``): NUMA hints from the CPU
and device managers merged per container (or per pod) and a policy that admits or rejects."""
