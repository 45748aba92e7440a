"""The model registry: built-in specs, specs from installed packages (entry points), and user spec files.

A spec module exposes ``SPECS``: a list of :class:`tritonsuite.core.spec.ModelSpec` (or a function returning one).
Other packages register theirs under the entry-point group ``tritonsuite.models``; a single file can be
passed to pytest with ``--model-spec path.py``.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Iterable

from tritonsuite.core.spec import ModelSpec

ENTRY_POINT_GROUP = "tritonsuite.models"
BUILTIN_MODULES = ("tritonsuite.models.bert", "tritonsuite.models.identity", "tritonsuite.models.fastpitch",
                   "tritonsuite.models.nnunet", "tritonsuite.models.tft", "tritonsuite.models.wide_deep")


class RegistryError(ValueError):
    """A model, size or spec file the registry cannot resolve; the message names the valid choices."""


def _specs_of(obj: object, origin: str) -> list[ModelSpec]:
    specs = obj() if callable(obj) and not isinstance(obj, (list, tuple)) else obj
    if isinstance(specs, ModelSpec):
        specs = [specs]
    if not isinstance(specs, (list, tuple)) or not all(isinstance(s, ModelSpec) for s in specs):
        raise RegistryError(f"{origin}: SPECS must be a list of tritonsuite.core.spec.ModelSpec, got {type(specs).__name__}")
    return list(specs)


class Registry:
    def __init__(self, specs: Iterable[ModelSpec] = ()):
        self._specs: dict[tuple[str, str], ModelSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: ModelSpec) -> None:
        self._specs[(spec.name, spec.size)] = spec

    def names(self) -> list[str]:
        return sorted({name for name, _ in self._specs})

    def sizes(self, name: str) -> list[str]:
        return [size for n, size in self._specs if n == name]

    def get(self, name: str, size: str) -> ModelSpec:
        if name not in self.names():
            raise RegistryError(f"unknown model {name!r}; valid choices: {', '.join(self.names())}")
        if (name, size) not in self._specs:
            raise RegistryError(f"model {name!r} has no size {size!r}; valid choices: {', '.join(self.sizes(name))}")
        return self._specs[(name, size)]

    def load_module(self, module_name: str) -> None:
        module = importlib.import_module(module_name)
        for spec in _specs_of(getattr(module, "SPECS", None), module_name):
            self.add(spec)

    def load_file(self, path: str | Path) -> list[ModelSpec]:
        """Import a user spec file (``--model-spec path.py``) and register its ``SPECS``."""
        path = Path(path)
        if not path.is_file():
            raise RegistryError(f"--model-spec {path}: no such file")
        module_name = f"tritonsuite_user_spec_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise RegistryError(f"--model-spec {path}: not a Python file; expected a .py file defining SPECS "
                                f"(a list of ModelSpec)")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: its error, in one line
            del sys.modules[module_name]
            first_line = (str(exc).strip().splitlines() or [""])[0]
            raise RegistryError(f"--model-spec {path}: {type(exc).__name__}: {first_line}") from None
        if not hasattr(module, "SPECS"):
            raise RegistryError(f"--model-spec {path}: the file defines no SPECS list")
        specs = _specs_of(module.SPECS, str(path))
        for spec in specs:
            self.add(spec)
        return specs


def default_registry(spec_files: Iterable[str | Path] = ()) -> Registry:
    """Built-in models, then installed entry points, then user spec files (later ones win on a name clash)."""
    registry = Registry()
    for module_name in BUILTIN_MODULES:
        registry.load_module(module_name)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.value.split(":")[0] in BUILTIN_MODULES:
            continue
        for spec in _specs_of(ep.load(), f"entry point {ep.name}"):
            registry.add(spec)
    for path in spec_files:
        registry.load_file(path)
    return registry
