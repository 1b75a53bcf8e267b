"""The ``scripted`` backend kind: tests register it through the production registry, which
never registers it itself.

``ScriptedModels`` plays a model server: each model name is one ``ScriptedBackend``, made on
first use, and a config picks its fake by that name (``BackendConfig(kind="scripted",
model=...)``). A test scripts and inspects the fake by the same name, never by reaching into a
memory's components, and the real pool and roles build and call it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tiermem.config import BackendConfig
from tiermem.slm.scripted import ScriptedBackend, ScriptItem

KIND = "scripted"


class ScriptedModels:
    """The fakes behind backend kind ``scripted``, one per model name."""

    def __init__(self) -> None:
        self._backends: dict[str, ScriptedBackend] = {}
        self._lock = threading.Lock()

    def __getitem__(self, model: str) -> ScriptedBackend:
        with self._lock:
            if model not in self._backends:
                self._backends[model] = ScriptedBackend(model=model)
            return self._backends[model]

    def serve(self, model: str, default: ScriptItem) -> ScriptedBackend:
        """Answer calls to ``model`` with ``default`` once its queue is empty."""
        backend = self[model]
        backend.respond_with(default)
        return backend

    def build(self, config: BackendConfig, models_dir: Path, owner: str) -> ScriptedBackend:
        """The registry's factory for kind ``scripted``: the fake of ``config.model``, whoever
        the owner."""
        return self[config.model]
