"""Model code with no spaCy in it: loading, batching, devices, NLI scoring."""
from .loading import DEFAULT_MODEL, embedded_model_path, resolve_device
from .nli import NLIBackend, make_nli_backend

__all__ = [
    "DEFAULT_MODEL",
    "embedded_model_path",
    "resolve_device",
    "NLIBackend",
    "make_nli_backend",
]
