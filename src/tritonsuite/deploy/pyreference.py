"""A reference the user writes in Python: ``--reference DEPLOYMENT=FILE.py``, the file defining
``reference(inputs)``, which takes one request's tensors (name -> numpy array, batch first) and returns its outputs
(name -> array) or, for a decoupled model, its responses in order (a list of such dicts). It is how a python or BLS
deployment, whose ``model.py`` nothing runs in-process, gets judged beyond its ``validation_data``."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable


class ReferenceFileError(ValueError):
    """A reference file that cannot be used; the message names it and what was expected."""


def reference_callable(file: str | Path) -> Callable:
    path = Path(file)
    spec = importlib.util.spec_from_file_location(f"tritonsuite_reference_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ReferenceFileError(f"--reference {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ReferenceFileError(f"--reference {path}: importing it failed: {type(exc).__name__}: {exc}") from None
    function = getattr(module, "reference", None)
    if not callable(function):
        raise ReferenceFileError(f"--reference {path}: defines no reference(inputs) function")
    return function


def python_reference(deployment, file: str | Path | None) -> Callable:
    """The in-process reference of a deployment whose reference is Python: ``file``'s ``reference`` (any
    deployment's ``--reference NAME=FILE.py``); a python-backend deployment without one has none (its model.py runs
    inside Triton only)."""
    if file is not None:
        return reference_callable(file)
    raise ReferenceFileError(f"{deployment.name} is a python-backend model: nothing runs its model.py in-process; "
                             f"name a reference with --reference {deployment.name}=FILE (.onnx, .pt, or a .py "
                             f"defining reference(inputs)), or give validation_data in --input-data")
