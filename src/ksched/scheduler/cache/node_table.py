"""The columnar node table: allocatable, requested and non-zero requested of every node as
NumPy arrays, one row per node and one column per resource (extended resources and hugepages
get columns as they appear). Resource plugins filter and score all candidate rows at once.

A pod's vector for ``add_pod`` (its requests' columns and values) is kept on its ``PodInfo``
and, with :data:`TEMPLATE_VECTORS`, in its template's dict (``framework/template.py``'s
``known_template_cache``: the pods of one template have equal requests), so each new
``PodInfo`` of a replica (the assumed pod of every cycle) takes it without looking its columns
up again; off, each ``PodInfo`` works it out (the reference)."""

from __future__ import annotations

import numpy as np

from ksched.scheduler.framework.template import known_template_cache
from ksched.scheduler.framework.types import NodeInfo, PodInfo

__all__ = ["CPU", "EPHEMERAL", "MEMORY", "PODS", "TEMPLATE_VECTORS", "NodeTable", "ResourceColumns"]

# Whether a pod's add_pod vector is shared by its template (False: each PodInfo works it out).
TEMPLATE_VECTORS = True
_VECTOR_KEY = "node_table.vector"

CPU = 0
MEMORY = 1
EPHEMERAL = 2
PODS = 3
_BASE = ("cpu", "memory", "ephemeral-storage", "pods")


class ResourceColumns:
    """Resource name -> column index; grows as new resource names appear."""

    __slots__ = ("index", "names")

    def __init__(self) -> None:
        self.names: list[str] = list(_BASE)
        self.index: dict[str, int] = {n: i for i, n in enumerate(_BASE)}

    def col(self, name: str) -> int:
        i = self.index.get(name)
        if i is None:
            i = self.index[name] = len(self.names)
            self.names.append(name)
        return i

    def __len__(self) -> int:
        return len(self.names)


class NodeTable:
    """``alloc[row, col]``, ``req[row, col]`` (``req[:, PODS]`` is the pod count) and
    ``nz[row] = (milli-CPU, memory)`` with upstream's non-zero defaults."""

    __slots__ = ("alloc", "cols", "nz", "req")

    def __init__(self, cols: ResourceColumns | None = None, rows: int = 64) -> None:
        self.cols = cols if cols is not None else ResourceColumns()
        r = len(self.cols)
        self.alloc = np.zeros((rows, r), dtype=np.int64)
        self.req = np.zeros((rows, r), dtype=np.int64)
        self.nz = np.zeros((rows, 2), dtype=np.int64)

    @property
    def capacity(self) -> int:
        return self.alloc.shape[0]

    def fit(self, rows: int) -> None:
        """Make room for ``rows`` rows and every registered column."""
        cap, ncol = self.alloc.shape
        want_cols = len(self.cols)
        if rows <= cap and want_cols <= ncol:
            return
        new_cap = max(cap, 64)
        while new_cap < rows:
            new_cap *= 2
        for attr, width in (("alloc", want_cols), ("req", want_cols), ("nz", 2)):
            old = getattr(self, attr)
            arr = np.zeros((new_cap, max(width, old.shape[1])), dtype=np.int64)
            arr[: old.shape[0], : old.shape[1]] = old
            setattr(self, attr, arr)

    def write(self, row: int, ni: NodeInfo) -> None:
        """Copy a NodeInfo's resources into its row."""
        cols = self.cols
        for k in ni.allocatable:
            cols.col(k)
        for k in ni.requested:
            cols.col(k)
        self.fit(row + 1)
        a = self.alloc[row]
        a[:] = 0
        idx = cols.index
        for k, v in ni.allocatable.items():
            a[idx[k]] = v
        q = self.req[row]
        q[:] = 0
        for k, v in ni.requested.items():
            q[idx[k]] = v
        q[PODS] = len(ni.pods)
        self.nz[row, 0] = ni.non_zero_requested[0]
        self.nz[row, 1] = ni.non_zero_requested[1]

    def write_rows(self, rows: list[int], infos: list[NodeInfo]) -> None:
        """``write`` of many rows at once (``infos[i]`` into ``rows[i]``): the same arrays, with
        one NumPy assignment per array instead of a few per row (a cache built in bulk)."""
        if not rows:
            return
        cols = self.cols
        for ni in infos:
            for k in ni.allocatable:
                cols.col(k)
            for k in ni.requested:
                cols.col(k)
        self.fit(max(rows) + 1)
        names = cols.names
        width = self.alloc.shape[1]
        pad = [0] * (width - len(names))
        alloc = [[ni.allocatable.get(k, 0) for k in names] + pad for ni in infos]
        req = []
        for ni in infos:
            q = [ni.requested.get(k, 0) for k in names] + pad
            q[PODS] = len(ni.pods)
            req.append(q)
        idx = np.asarray(rows, dtype=np.int64)
        self.alloc[idx] = np.asarray(alloc, dtype=np.int64)
        self.req[idx] = np.asarray(req, dtype=np.int64)
        self.nz[idx] = np.asarray([ni.non_zero_requested[:2] for ni in infos], dtype=np.int64)

    def add_pod(self, row: int, pi: PodInfo, sign: int) -> None:
        """Add (sign 1) or remove (sign -1) one pod's requests to a row, without rewriting it."""
        cached = pi.table_vector
        if cached is None or cached[0] is not self.cols or cached[1] != len(self.cols):
            cols = self.cols
            t = known_template_cache(pi.pod) if TEMPLATE_VECTORS else None
            cached = t.get(_VECTOR_KEY) if t is not None else None
            if cached is None or cached[0] is not cols or cached[1] != len(cols):
                pairs = tuple((cols.col(k), v) for k, v in pi.requests.items())
                cached = (cols, len(cols), pairs)
                if t is not None:
                    t[_VECTOR_KEY] = cached
            pi.table_vector = cached
            self.fit(row + 1)
        # Element updates on row views: a pod requests a few resources, for which this is
        # cheaper than NumPy's fancy indexing.
        req_row = self.req[row]
        if sign > 0:
            for c, v in cached[2]:
                req_row[c] += v
        else:
            for c, v in cached[2]:
                req_row[c] -= v
        req_row[PODS] += sign
        nz_row = self.nz[row]
        nz = pi.non_zero
        nz_row[0] += sign * nz[0]
        nz_row[1] += sign * nz[1]

    def clear(self, row: int) -> None:
        if row < self.capacity:
            self.alloc[row] = 0
            self.req[row] = 0
            self.nz[row] = 0

    def copy_rows_from(self, other: NodeTable, rows: list[int], same_alloc: list[int] | None = None) -> None:
        """Copy rows (and any new columns) from another table sharing the same columns.
        ``same_alloc``: rows of ``rows`` whose allocatable row this table holds already (not
        copied when the tables have the same width and there are few rows)."""
        self.fit(other.capacity)
        if other.alloc.shape[1] != self.alloc.shape[1]:
            self.fit(other.capacity)
        if not rows:
            return
        ncol = other.alloc.shape[1]
        if len(rows) <= 4:
            if ncol == self.alloc.shape[1]:
                # (The usual case: the same width. A whole row, without a slice object.)
                for r in rows:
                    if not same_alloc or r not in same_alloc:
                        self.alloc[r] = other.alloc[r]
                    self.req[r] = other.req[r]
                    self.nz[r] = other.nz[r]
                return
            for r in rows:
                self.alloc[r, :ncol] = other.alloc[r]
                self.req[r, :ncol] = other.req[r]
                self.nz[r] = other.nz[r]
            return
        idx = np.asarray(rows, dtype=np.int64)
        self.alloc[idx, :ncol] = other.alloc[idx]
        self.req[idx, :ncol] = other.req[idx]
        self.nz[idx] = other.nz[idx]
