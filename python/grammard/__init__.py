"""grammard: structured output for LLM inference engines, served by the
grammard sidecar.

``grammard.Client`` is the C client library (libgrammard_client.so, shipped
inside this package) one call for one call; ``grammard.vllm`` and
``grammard.sglang`` are the engines' structured-output backends built on it,
and the ``vllm.general_plugins`` / ``sglang.srt.plugins`` entry points
install them (see the README). Neither engine is needed to import this
package.
"""

from .client import (Client, CompileResult, DeviceLogits, Readiness, State,
                     StepResult, TokenizerInfo)
from .constraints import (Constraint, JsonOptions, choice, ebnf, json_object,
                          json_schema, regex, structural_tag)
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss,
                     DeadlineExceeded, Error, FailedPrecondition, Internal,
                     InvalidArgument, NotFound, OutOfRange, PermissionDenied,
                     ResourceExhausted, Unauthenticated, Unavailable,
                     Unimplemented, Unknown)
from .masks import apply_mask_cpu, apply_mask_cuda

__version__ = "0.1.0"

__all__ = [
    "Client", "CompileResult", "DeviceLogits", "Readiness", "State",
    "StepResult", "TokenizerInfo", "Constraint", "JsonOptions", "choice",
    "ebnf", "json_object", "json_schema", "regex", "structural_tag", "Error",
    "Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "Internal", "InvalidArgument", "NotFound",
    "OutOfRange", "PermissionDenied", "ResourceExhausted", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown", "apply_mask_cpu",
    "apply_mask_cuda", "__version__",
]
