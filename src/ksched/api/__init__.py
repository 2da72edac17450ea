"""The Kubernetes object model as the scheduler sees it. Imports nothing else of ksched."""

from ksched.api.errors import FieldError, Path, ValidationError
from ksched.api.event import Event
from ksched.api.kinds import KIND_BY_PLURAL, KINDS, UnknownKindError, kind_class, parse_object
from ksched.api.labels import LabelSelector, parse_field_selector, parse_label_selector
from ksched.api.lease import Lease
from ksched.api.meta import KubeObject, format_time, parse_time
from ksched.api.namespace import Namespace
from ksched.api.node import Node
from ksched.api.pdb import PodDisruptionBudget
from ksched.api.pod import Pod
from ksched.api.priorityclass import PriorityClass
from ksched.api.quantity import Quantity, QuantityError, milli_value, parse_quantity, value
from ksched.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from ksched.api.taints import Taint, Toleration

__all__ = [
    "KINDS",
    "KIND_BY_PLURAL",
    "CSINode",
    "Event",
    "FieldError",
    "KubeObject",
    "LabelSelector",
    "Lease",
    "Namespace",
    "Node",
    "Path",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodDisruptionBudget",
    "PriorityClass",
    "Quantity",
    "QuantityError",
    "StorageClass",
    "Taint",
    "Toleration",
    "UnknownKindError",
    "ValidationError",
    "format_time",
    "kind_class",
    "milli_value",
    "parse_field_selector",
    "parse_label_selector",
    "parse_object",
    "parse_quantity",
    "parse_time",
    "value",
]
