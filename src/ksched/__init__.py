"""ksched: a Kubernetes scheduler and scheduling simulator, faithful to upstream kube-scheduler.

``ksched.__version__`` is looked up in the installed package's metadata the first time it is
read (importing ``importlib.metadata`` and scanning the installed distributions costs ~40 ms,
which every ``ksched run`` start would otherwise pay).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("ksched")
        except PackageNotFoundError:  # running from a source tree without installation
            v = "0.0.0+unknown"
        globals()["__version__"] = v
        return v
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
