"""The CPU manager (upstream ``pkg/kubelet/cm/cpumanager``): the static policy hands
Guaranteed containers with whole CPUs exclusive CPUs, chosen by topology."""
