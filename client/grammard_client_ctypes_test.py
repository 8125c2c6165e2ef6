"""The C ABI from Python through ctypes, as an engine would load it: the
shared object loads, its symbols resolve and grammard_client_options has
the layout declared here (a 300 ms connect timeout comes back in the error
of a connect to a port nobody serves)."""
import ctypes
import os
import sys


class Options(ctypes.Structure):
    _fields_ = [
        ("target", ctypes.c_char_p),
        ("tokenizer", ctypes.c_char_p),
        ("tls", ctypes.c_int32),
        ("tls_ca_file", ctypes.c_char_p),
        ("connect_timeout_ms", ctypes.c_int64),
        ("step_timeout_ms", ctypes.c_int64),
        ("outage_timeout_ms", ctypes.c_int64),
        ("backoff_initial_ms", ctypes.c_int64),
        ("backoff_max_ms", ctypes.c_int64),
        ("tls_cert_file", ctypes.c_char_p),
        ("tls_key_file", ctypes.c_char_p),
        ("auth_token_file", ctypes.c_char_p),
    ]


def main():
    lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "libgrammard_client.so"))
    lib.grammard_client_connect.argtypes = [
        ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
    lib.grammard_client_connect.restype = ctypes.c_int32
    lib.grammard_client_last_error.argtypes = [ctypes.c_void_p]
    lib.grammard_client_last_error.restype = ctypes.c_char_p
    lib.grammard_client_destroy.argtypes = [ctypes.c_void_p]

    options = Options(target=b"127.0.0.1:1", tokenizer=b"llama3",
                      connect_timeout_ms=300)
    handle = ctypes.c_void_p()
    code = lib.grammard_client_connect(ctypes.byref(options),
                                       ctypes.byref(handle))
    error = lib.grammard_client_last_error(handle).decode()
    lib.grammard_client_destroy(handle)
    if code != 14 or "did not answer within 300 ms" not in error:
        print("unexpected: code %d, error %r" % (code, error))
        return 1
    print("ok: code 14, %s" % error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
