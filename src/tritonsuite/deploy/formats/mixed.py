"""The parts of the ``mixed`` recipes that TorchScript formats share (docs/precision.md): fp32 islands and autocast.

- :func:`keep_fp32` wraps every submodule whose type is among the spec's ``fp32_modules`` (normalisations and
  softmax by default, :data:`tritonsuite.core.spec.FP32_MODULES`) in an :class:`Fp32Island`-style module: its
  parameters stay fp32, its input is cast to fp32 and its output back to the input's dtype. The wrapper is
  scriptable, so ``ts-script`` (which does not record autocast) gets its fp32 islands from it.
- :func:`autocast_module` runs a module under ``torch.autocast(device_type, float16, cache_enabled=False)`` and
  casts its floating outputs to the dtypes the configuration declares: ``ts-trace`` traces it, so the casts autocast
  makes are recorded in the graph (``aten::to`` to Half) and the artifact needs no autocast when served.

Measured on torch 2.13 (CPU): ``torch.autocast("cpu", dtype=torch.float16)`` works, but CPU autocast's fp32 list
has none of layer_norm, group_norm, softmax, sum, mean, norm, pow, exp, log (only rare ops such as prod, cdist,
mse_loss): those run in half when their input is half. CUDA autocast's fp32 list has them. So on either device the
trace also keeps the spec's fp32 module types as islands, which is what makes a CPU trace mixed and not fp16.
"""
from __future__ import annotations

import functools

import numpy as np

from tritonsuite.deploy.formats.base import ExportUnsupported


def is_fp32_type(module, names: tuple[str, ...]) -> bool:
    """Whether ``module``'s type, or a type it derives from, is named in ``names``."""
    return any(c.__name__ in names for c in type(module).__mro__)


@functools.lru_cache(maxsize=None)
def _island_class():
    import torch

    class Fp32Island(torch.nn.Module):
        """A module kept in fp32 inside a reduced-precision model: input cast to fp32, output back."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner.float()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x.float()).to(x.dtype)

    return Fp32Island


def keep_fp32(module, names: tuple[str, ...]) -> list[str]:
    """Wrap, in place, every submodule of ``module`` whose type is named in ``names`` as an fp32 island (not
    descending into it); return the wrapped submodules' qualified names."""
    island = _island_class()
    wrapped = []

    def visit(parent, prefix: str) -> None:
        for name, child in list(parent.named_children()):
            qualified = f"{prefix}{name}"
            if isinstance(child, island):
                continue
            if is_fp32_type(child, names):
                setattr(parent, name, island(child))
                wrapped.append(qualified)
            else:
                visit(child, f"{qualified}.")

    visit(module, "")
    return wrapped


def half_with_fp32_islands(module, spec):
    """``ts-script``'s mixed module: the whole module's ``.half()`` (the model's own ``half()`` where it has one)
    with the spec's fp32 module types as fp32 islands. Refused when the module has none of those types: it would be
    fp16 under another name."""
    module = module.half()
    if not keep_fp32(module, tuple(spec.fp32_modules)):
        raise ExportUnsupported(f"{spec.key} has no module of the fp32 types ({', '.join(spec.fp32_modules)}): "
                                f"its mixed would be its fp16")
    return module


def autocast_module(module, spec, device_type: str):
    """``module`` (fp32 parameters) run under autocast to float16 with the cast cache off, its floating outputs cast
    to the configuration's dtypes."""
    import torch

    declared = [getattr(torch, np.dtype(t.dtype).name) for t in spec.outputs]

    class Autocast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            with torch.autocast(device_type=device_type, dtype=torch.float16, cache_enabled=False):
                outputs = self.inner(*args)
            single = not isinstance(outputs, (tuple, list))
            cast = tuple(o.to(declared[i]) if i < len(declared) and o.is_floating_point()
                         and declared[i].is_floating_point else o
                         for i, o in enumerate((outputs,) if single else outputs))
            return cast[0] if single else cast

    return Autocast(module).eval()
