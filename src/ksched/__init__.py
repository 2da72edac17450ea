"""ksched: a Kubernetes scheduler and scheduling simulator, faithful to upstream kube-scheduler."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ksched")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
