"""The options of the deployment kinds beyond one stateless model, with perf_analyzer's names and syntax:
``--sequence-length``, ``--sequence-length-variation``, ``--sequence-id-range`` (sequence models,
:mod:`tritonsuite.load.kinds.sequence`) and ``--bls-composing-models`` (the models a BLS deployment calls)."""
from __future__ import annotations

from tritonsuite.core import description
from tritonsuite.run.checks import OptionError


def parse_bls_composing(values, known) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``[DEPLOYMENT=]a[:3],b`` values -> ((deployment or "", ("a:3", "b")), ...); every name must be a known model."""
    found = {}
    for value in values or ():
        target, sep, names = str(value).rpartition("=")
        models = tuple(n.strip() for n in names.split(",") if n.strip())
        for name in ((target,) if sep else ()) + models:
            base, _, version = name.partition(":")
            if base not in known or (version and not version.isdigit()):
                raise OptionError(f"--bls-composing-models {value!r}: {name!r} is not a deployment of the run "
                                  f"(NAME or NAME:VERSION); valid choices: {', '.join(sorted(known))}")
        if not models:
            raise OptionError(f"--bls-composing-models {value!r}: expected [DEPLOYMENT=]NAME[:VERSION],...")
        found[target if sep else ""] = models
    return tuple(found.items())


def kind_options(opt, registry) -> dict:
    """The Options fields of these kinds, or OptionError naming the bad value and what is valid."""
    try:
        sequences = description.sequence_options(opt.sequence_length, opt.sequence_length_variation,
                                                 opt.sequence_id_range)
    except description.DescriptionError as exc:
        raise OptionError(str(exc)) from None
    return {"sequences": sequences, "bls_composing": parse_bls_composing(opt.bls_composing_models, registry.names())}
