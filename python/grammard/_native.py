"""ctypes bindings of libgrammard_client.so (client/grammard_client.h).

The library is found, in order: $GRAMMARD_CLIENT_LIBRARY, the copy inside
this package (the wheel ships one), then the system's loader path. ctypes
releases the GIL for the length of each call, so a thread blocked waiting
for masks does not stall the others.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int32,
                    c_int64, c_size_t, c_uint8, c_uint64, c_void_p)

LIBRARY_NAME = "libgrammard_client.so"

CONSTRAINT_JSON_SCHEMA = 1
STATE_COMPILING, STATE_READY, STATE_FAILED = 0, 1, 2
FLAG_TERMINATED, FLAG_CAN_TERMINATE = 1, 2
DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16 = 0, 1, 2
LATENCY_BUCKETS = 16


class Options(Structure):
    _fields_ = [
        ("target", c_char_p),
        ("tokenizer", c_char_p),
        ("tls", c_int32),
        ("tls_ca_file", c_char_p),
        ("connect_timeout_ms", c_int64),
        ("step_timeout_ms", c_int64),
        ("outage_timeout_ms", c_int64),
        ("backoff_initial_ms", c_int64),
        ("backoff_max_ms", c_int64),
        ("tls_cert_file", c_char_p),
        ("tls_key_file", c_char_p),
        ("auth_token_file", c_char_p),
    ]


class OpenOptions(Structure):
    _fields_ = [("think_end_token", c_int32), ("jump_forward", c_int32)]


class Latency(Structure):
    _fields_ = [
        ("buckets", c_uint64 * LATENCY_BUCKETS),
        ("count", c_uint64),
        ("sum_seconds", c_double),
        ("max_seconds", c_double),
    ]


class Metrics(Structure):
    _fields_ = [
        ("steps", c_uint64),
        ("step_latency", Latency),
        ("wait_time", Latency),
        ("reconnects", c_uint64),
        ("reconnect_attempts", c_uint64),
        ("outages_given_up", c_uint64),
        ("outage_seconds", c_double),
        ("replayed_sequences", c_uint64),
        ("replayed_tokens", c_uint64),
    ]


_i32p, _i64p, _u64p, _u8p = (POINTER(c_int32), POINTER(c_int64),
                             POINTER(c_uint64), POINTER(c_uint8))

# name: (restype, argtypes)
_SIGNATURES = {
    "grammard_client_connect": (c_int32, [POINTER(Options),
                                          POINTER(c_void_p)]),
    "grammard_client_destroy": (None, [c_void_p]),
    "grammard_client_last_error": (c_char_p, [c_void_p]),
    "grammard_client_vocab_size": (c_int32, [c_void_p]),
    "grammard_client_words_per_row": (c_int32, [c_void_p]),
    "grammard_client_eos_token_ids": (c_int64, [c_void_p, _i32p, c_int64]),
    "grammard_client_list_tokenizers": (c_int32, [c_void_p, c_char_p,
                                                  c_size_t,
                                                  POINTER(c_size_t)]),
    "grammard_client_open_with": (c_int32, [c_void_p, c_uint64, c_char_p,
                                            c_size_t, POINTER(OpenOptions)]),
    "grammard_client_close": (c_int32, [c_void_p, c_uint64]),
    "grammard_client_compile": (c_int32, [c_void_p, c_char_p, c_size_t,
                                          c_int32, c_int64, c_char_p,
                                          c_size_t, _i32p]),
    "grammard_client_state": (c_int32, [c_void_p, c_uint64, _i32p]),
    "grammard_client_wait_ready": (c_int32, [c_void_p, _u64p, c_int64,
                                             c_int64]),
    "grammard_client_submit_step": (c_int32, [c_void_p, c_int64, c_void_p,
                                              c_void_p, c_void_p, c_void_p,
                                              c_void_p, c_void_p]),
    "grammard_client_pending_rows": (c_int64, [c_void_p]),
    "grammard_client_wait_masks_at": (c_int32, [c_void_p, c_void_p, c_int64,
                                                c_int64, c_void_p, c_int64,
                                                c_void_p, c_void_p]),
    "grammard_client_jump_forward": (c_int32, [c_void_p, c_int64, c_char_p,
                                               c_size_t, POINTER(c_size_t),
                                               _i32p, c_int64, _i64p]),
    "grammard_client_wait_apply_cpu": (c_int32, [c_void_p, c_void_p, c_int32,
                                                 c_int64, c_int64, c_int64,
                                                 c_void_p, c_int64, c_void_p,
                                                 c_void_p]),
    "grammard_client_wait_apply_cuda": (c_int32, [c_void_p, c_void_p, c_int32,
                                                  c_int64, c_int64, c_int64,
                                                  c_void_p, c_void_p, c_int64,
                                                  c_void_p, c_void_p]),
    "grammard_client_sync_readiness": (c_int32, [c_void_p, c_char_p, c_uint64,
                                                 c_int32, c_int32, _u64p,
                                                 c_int64, c_int64, _i32p]),
    "grammard_client_metrics_snapshot": (c_int32, [c_void_p,
                                                   POINTER(Metrics)]),
    "grammard_apply_mask_cpu": (c_int32, [c_void_p, c_int32, c_int64,
                                          c_int64, c_int64, c_void_p,
                                          c_int64, c_int64, c_int64, c_int64,
                                          c_void_p, c_char_p, c_size_t]),
    "grammard_apply_mask_cuda": (c_int32, [c_void_p, c_int32, c_int64,
                                           c_int64, c_int64, c_void_p,
                                           c_int64, c_int64, c_int64, c_int64,
                                           c_void_p, c_void_p, c_char_p,
                                           c_size_t]),
}

_lib = None


def library_path() -> str:
    """Where the library is loaded from (see the module's doc)."""
    explicit = os.environ.get("GRAMMARD_CLIENT_LIBRARY")
    if explicit:
        return explicit
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           LIBRARY_NAME)
    if os.path.exists(bundled):
        return bundled
    return LIBRARY_NAME


def lib() -> ctypes.CDLL:
    """The loaded library, its functions typed (loaded on first use)."""
    global _lib
    if _lib is None:
        path = library_path()
        try:
            loaded = ctypes.CDLL(path)
        except OSError as e:
            from .errors import Unavailable
            raise Unavailable(
                f"cannot load {path}: {e} (set GRAMMARD_CLIENT_LIBRARY, or "
                f"install the grammard wheel, which ships it)") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(loaded, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _lib = loaded
    return _lib


def error_text(buffer: ctypes.Array) -> str:
    return buffer.value.decode("utf-8", "replace")


ERROR_CAPACITY = 1024


def new_error_buffer() -> ctypes.Array:
    return (c_char * ERROR_CAPACITY)()
