"""What kube-controller-manager does for the embedded cluster: controllers that are clients of
the API (informers in, API writes out), and the manager that runs them."""
