"""Masking logits with packed token masks, without a client: for engines
that keep their own mask buffer (SGLang's vocab_mask, vLLM's bitmask).

Bit t % 32 of word t // 32 of a mask row allows token t (the layout of
XGrammar's bitmask, int32 or uint32 words); disallowed logits become -inf.
Both calls run grammard's kernels (gpu/token_mask.h): the CPU one and the
CUDA one are bit-identical.

Cost: one pass over the masked rows; the CUDA call launches one kernel on
the given stream and does not wait for it. Thread-safety: stateless.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _buffers, _native
from .errors import error_for, InvalidArgument


class DeviceArray:
    """Device memory described by hand, for callers without torch CUDA
    tensors: `pointer`, `rows` x `columns` elements of `dtype` ("float32",
    "float16", "bfloat16" for logits; "int32" for masks and indices), rows
    `row_stride` elements apart (0: columns)."""

    def __init__(self, pointer: int, dtype: str, rows: int, columns: int,
                 row_stride: int = 0):
        self.rows_view = _buffers.Rows(int(pointer), int(rows), int(columns),
                                       int(row_stride or columns), dtype,
                                       "cuda")


def _rows(obj: Any, what: str, device: str, writable: bool) -> _buffers.Rows:
    if isinstance(obj, DeviceArray):
        r = obj.rows_view
    else:
        r = _buffers.rows_of(obj, what, writable=writable)
    if r.device != device:
        raise InvalidArgument(f"{what} must be on {device}, not {r.device}")
    return r


def _apply(device: str, logits: Any, mask: Any, indices: Any,
           vocab: Optional[int], stream: Any) -> None:
    lg = _rows(logits, "logits", device, True)
    if lg.kind not in _buffers.DTYPE_CODES:
        raise InvalidArgument(
            f"logits must be float32, float16 or bfloat16, got {lg.kind}")
    mk = _rows(mask, "mask", device, False)
    if mk.kind not in ("int32", "uint32"):
        raise InvalidArgument(f"mask must be int32 (or uint32), got {mk.kind}")
    idx = None
    idx_address = None
    if indices is not None:
        if device == "cpu":
            idx = _buffers.int32_array(indices, "indices", mk.rows)
            idx_address = idx.ctypes.data
        else:
            ir = _rows(indices, "indices", device, False)
            if ir.kind != "int32" or ir.rows * ir.columns != mk.rows:
                raise InvalidArgument(
                    f"indices must be {mk.rows} int32 values in device "
                    f"memory")
            idx_address = ir.address
    error = _native.new_error_buffer()
    lib = _native.lib()
    mask_vocab = -1 if vocab is None else int(vocab)
    if device == "cpu":
        code = lib.grammard_apply_mask_cpu(
            lg.address, _buffers.DTYPE_CODES[lg.kind], lg.rows, lg.columns,
            lg.row_stride, mk.address, mk.rows, mk.columns, mk.row_stride,
            mask_vocab, idx_address, error, len(error))
    else:
        from .client import _stream
        code = lib.grammard_apply_mask_cuda(
            lg.address, _buffers.DTYPE_CODES[lg.kind], lg.rows, lg.columns,
            lg.row_stride, mk.address, mk.rows, mk.columns, mk.row_stride,
            mask_vocab, idx_address, _stream(stream), error, len(error))
    if code != 0:
        raise error_for(code, _native.error_text(error))


def apply_mask_cpu(logits: Any, mask: Any,
                   indices: Optional[Sequence[int]] = None,
                   vocab: Optional[int] = None) -> None:
    """Masks host logits in place: mask row k applies to logits row
    indices[k] (or row k). logits: float32/float16/bfloat16, 2-D (numpy,
    torch or a buffer); mask: int32/uint32 words, one row per masked row;
    vocab: the columns the mask speaks for (None: all its bits); logits
    columns past it are masked."""
    _apply("cpu", logits, mask, indices, vocab, None)


def apply_mask_cuda(logits: Any, mask: Any, indices: Any = None,
                    vocab: Optional[int] = None, stream: Any = None) -> None:
    """apply_mask_cpu on the GPU: logits, mask and indices in device memory
    (torch CUDA tensors or DeviceArray), masked on `stream` (a torch CUDA
    stream or its handle; None: the default stream)."""
    _apply("cuda", logits, mask, indices, vocab, stream)


def numpy_words(mask: Any) -> np.ndarray:
    """A CPU mask as a numpy uint32 view (no copy)."""
    if hasattr(mask, "numpy"):
        mask = mask.numpy()
    return np.asarray(mask).view(np.uint32)
