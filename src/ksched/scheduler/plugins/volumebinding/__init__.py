"""VolumeBinding (upstream ``pkg/scheduler/framework/plugins/volumebinding``): the plugin
(``volume_binding.py``), the volume binder (``binder.py``) and the assume caches
(``assume_cache.py``)."""

from ksched.scheduler.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from ksched.scheduler.plugins.volumebinding.volume_binding import (
    ERR_REASON_UNBOUND_IMMEDIATE,
    NAME,
    VolumeBinding,
    broken_linear,
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "NAME",
    "VolumeBinding",
    "broken_linear",
]
