"""Serialization of components whose only state is their settings (`cfg`).

Their models are referenced by name or path in the pipeline config, so
`nlp.to_disk` stores the settings and nothing else.
"""
import json
from pathlib import Path
from typing import Any, Dict, Sequence, Union

import srsly


class CfgSerializable:
    """to_disk / from_disk / to_bytes / from_bytes of `self.cfg`.

    `cfg_keys` names the settings restored on loading; other keys in a stored
    file are ignored.
    """

    cfg: Dict[str, Any]
    cfg_keys: Sequence[str] = ()

    def _restore(self, cfg: Dict[str, Any]) -> Any:
        self.cfg.update({key: cfg[key] for key in self.cfg_keys if key in cfg})
        return self

    def to_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        # The stdlib writes floats exactly (0.3 stays 0.3).
        (path / "cfg").write_text(json.dumps(self.cfg, indent=2), encoding="utf-8")

    def from_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> Any:
        return self._restore(json.loads((Path(path) / "cfg").read_text(encoding="utf-8")))

    def to_bytes(self, *, exclude: Sequence[str] = tuple()) -> bytes:
        return srsly.msgpack_dumps({"cfg": self.cfg})

    def from_bytes(self, bytes_data: bytes, *, exclude: Sequence[str] = tuple()) -> Any:
        return self._restore(srsly.msgpack_loads(bytes_data)["cfg"])
