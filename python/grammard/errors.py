"""Errors of grammard calls: one exception class per gRPC status code.

Every failure of a call into the daemon or the client library raises a
subclass of :class:`Error` carrying the canonical gRPC code and the
message the daemon (or the library) gave. The classes also derive from the
Python exception that means the same thing, so ``except ValueError`` catches
an invalid argument and ``except TimeoutError`` a deadline.
"""

from __future__ import annotations


class Error(Exception):
    """A grammard call failed. ``code`` is the gRPC status code (an int),
    ``message`` what the daemon or the library said."""

    code: int = 2  # UNKNOWN

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{CODE_NAMES.get(self.code, self.code)}: {self.message}"


class Cancelled(Error):
    code = 1


class Unknown(Error):
    code = 2


class InvalidArgument(Error, ValueError):
    code = 3


class DeadlineExceeded(Error, TimeoutError):
    code = 4


class NotFound(Error, LookupError):
    code = 5


class AlreadyExists(Error):
    code = 6


class PermissionDenied(Error, PermissionError):
    code = 7


class ResourceExhausted(Error):
    code = 8


class FailedPrecondition(Error):
    code = 9


class Aborted(Error):
    code = 10


class OutOfRange(Error, IndexError):
    code = 11


class Unimplemented(Error, NotImplementedError):
    code = 12


class Internal(Error):
    code = 13


class Unavailable(Error, ConnectionError):
    code = 14


class DataLoss(Error):
    code = 15


class Unauthenticated(Error, PermissionError):
    code = 16


_BY_CODE = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded,
                NotFound, AlreadyExists, PermissionDenied, ResourceExhausted,
                FailedPrecondition, Aborted, OutOfRange, Unimplemented,
                Internal, Unavailable, DataLoss, Unauthenticated)
}

CODE_NAMES = {
    0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND", 6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
    15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}


def error_for(code: int, message: str) -> Error:
    """The exception for a gRPC status code (Unknown for a code it does not
    know)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return Error(message, code)
    return cls(message)
