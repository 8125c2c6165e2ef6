"""Memory the library reads or writes, from numpy arrays, torch tensors or
any object exposing a CPU buffer: its address, shape and row stride, checked
so that a wrong shape, dtype or device is an InvalidArgument naming it, never
a write out of bounds.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional

from . import _native
from .errors import InvalidArgument


@dataclass
class Rows:
    """A 2-D block of elements: row r starts at address + r * row_stride
    elements of `itemsize` bytes."""

    address: int
    rows: int
    columns: int
    row_stride: int
    kind: str      # "int32", "uint32", "float32", "float16", "bfloat16"
    device: str    # "cpu" or "cuda"
    keepalive: Any = None  # what the address belongs to


_TORCH_KINDS = {
    "torch.int32": "int32",
    "torch.float32": "float32",
    "torch.float16": "float16",
    "torch.bfloat16": "bfloat16",
}
_NUMPY_KINDS = {"int32": "int32", "uint32": "uint32", "float32": "float32",
                "float16": "float16"}
_BUFFER_KINDS = {"i": "int32", "I": "uint32", "f": "float32", "e": "float16"}
_ITEMSIZE = {"int32": 4, "uint32": 4, "float32": 4, "float16": 2,
             "bfloat16": 2}


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj,
                                                                "data_ptr")


def rows_of(obj: Any, what: str, *, writable: bool) -> Rows:
    """The rows of a 2-D (or 1-D: one row) array-like, C-contiguous within
    each row."""
    if _is_torch(obj):
        if obj.dim() not in (1, 2):
            raise InvalidArgument(
                f"{what} must be 1-D or 2-D, got shape {tuple(obj.shape)}")
        kind = _TORCH_KINDS.get(str(obj.dtype))
        t = obj if obj.dim() == 2 else obj.unsqueeze(0)
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise InvalidArgument(f"{what}: each row must be contiguous")
        return Rows(t.data_ptr(), t.shape[0], t.shape[1], t.stride(0),
                    kind or str(obj.dtype), obj.device.type, obj)
    array_interface = getattr(obj, "__array_interface__", None)
    if array_interface is not None:
        import numpy as np  # a dependency of the package
        a = np.asarray(obj)
        if a.ndim not in (1, 2):
            raise InvalidArgument(
                f"{what} must be 1-D or 2-D, got shape {a.shape}")
        if writable and not a.flags.writeable:
            raise InvalidArgument(f"{what} is read-only")
        a2 = a if a.ndim == 2 else a.reshape(1, -1)
        kind = _NUMPY_KINDS.get(a.dtype.name, a.dtype.name)
        if a2.shape[1] > 1 and a2.strides[1] != a.itemsize:
            raise InvalidArgument(f"{what}: each row must be contiguous")
        if a2.strides[0] % a.itemsize != 0:
            raise InvalidArgument(f"{what}: rows not aligned to elements")
        return Rows(a2.ctypes.data, a2.shape[0], a2.shape[1],
                    a2.strides[0] // a.itemsize if a2.shape[0] > 1
                    else a2.shape[1], kind, "cpu", obj)
    try:
        view = memoryview(obj)
    except TypeError:
        raise InvalidArgument(
            f"{what} must be a numpy array, a torch tensor or an object "
            f"exposing a buffer, got {type(obj).__name__}") from None
    if view.ndim not in (1, 2) or not view.c_contiguous:
        raise InvalidArgument(
            f"{what} must be a contiguous 1-D or 2-D buffer, got shape "
            f"{view.shape}")
    kind = _BUFFER_KINDS.get(view.format) or f"format {view.format!r}"
    if view.readonly:  # ctypes takes the address of writable buffers only
        raise InvalidArgument(f"{what} is read-only")
    holder = (ctypes.c_char * view.nbytes).from_buffer(view)
    rows = view.shape[0] if view.ndim == 2 else 1
    columns = view.shape[-1]
    return Rows(ctypes.addressof(holder), rows, columns, columns, kind, "cpu",
                (obj, view, holder))


def mask_rows(obj: Any, words_per_row: int, what: str) -> Rows:
    """A writable packed mask buffer: int32 or uint32, on the CPU, rows of
    at least `words_per_row` words."""
    r = rows_of(obj, what, writable=True)
    if r.device != "cpu":
        raise InvalidArgument(f"{what} must be in CPU memory, not {r.device}")
    if r.kind not in ("int32", "uint32"):
        raise InvalidArgument(f"{what} must be int32 (or uint32), got {r.kind}")
    if r.columns < words_per_row:
        raise InvalidArgument(
            f"{what} has rows of {r.columns} words; the vocabulary needs "
            f"{words_per_row}")
    return r


DTYPE_CODES = {"float32": _native.DTYPE_FLOAT32,
               "float16": _native.DTYPE_FLOAT16,
               "bfloat16": _native.DTYPE_BFLOAT16}


def logits_rows(obj: Any, what: str, device: str) -> Rows:
    """Writable logits: float32, float16 or bfloat16 on `device`."""
    r = rows_of(obj, what, writable=True)
    if r.device != device:
        raise InvalidArgument(f"{what} must be on {device}, not {r.device}")
    if r.kind not in DTYPE_CODES:
        raise InvalidArgument(
            f"{what} must be float32, float16 or bfloat16, got {r.kind}")
    return r


def int32_array(values: Any, what: str, n: Optional[int] = None):
    """A numpy int32 copy of `values` (checked length), or None."""
    if values is None:
        return None
    import numpy as np
    a = np.ascontiguousarray(values, dtype=np.int32)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise InvalidArgument(
            f"{what} must be a list of {n if n is not None else ''} ints, "
            f"got shape {a.shape}")
    return a
