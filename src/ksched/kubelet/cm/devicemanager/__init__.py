"""The device plugin manager (upstream ``pkg/kubelet/cm/devicemanager``) and the simulated
device plugins that register with it."""
