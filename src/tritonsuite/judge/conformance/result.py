"""What a conformance check takes and gives: the :class:`Target` (a deployment loaded on a running server) and the
:class:`CheckResult` (declared, observed, verdict, evidence), which becomes a row of scenario ``conformance``."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.rows import Row

VERDICTS = ("pass", "fail", "skipped")
_LOAD_SEEDS = itertools.count(1000)  # requests never sent before, for a cached deployment's load
#: verdict -> row status
STATUS = {"pass": "OK", "fail": "FAILED", "skipped": "SKIPPED"}


class ConformanceError(ValueError):
    """A check that cannot be asked for (unknown name); the message names the valid choices."""


@dataclass
class CheckResult:
    """One check of one deployment: what its configuration declares, what the live server showed, the verdict."""

    deployment: str
    check: str
    declared: str
    observed: str
    verdict: str  # VERDICTS
    reason: str = ""  # one line: why it failed or was skipped (empty when it passed)
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: the field paths the deployment's configuration sets (:func:`~tritonsuite.judge.conformance.fields.
    #: declared_fields`): the report lists them as a checklist, each beside the check that shows it
    fields: list[str] = field(default_factory=list)

    def __post_init__(self):
        blank = [n for n in ("deployment", "check", "declared", "observed") if not isinstance(getattr(self, n), str)]
        if blank:  # the report's row would print None where it names what was judged
            raise ValueError(f"a result of the {self.check} check without its {blank[0]} "
                             f"({getattr(self, blank[0])!r}): every report row names it")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}; valid choices: {', '.join(VERDICTS)}")
        if self.verdict != "pass" and not (isinstance(self.reason, str) and self.reason.strip()):
            raise ValueError(f"a {self.verdict} verdict of the {self.check} check without its reason "
                             f"({self.reason!r}): the report would not say why")

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def line(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"{self.deployment} {self.check}: {self.verdict}{why}"

    def to_row(self, **identity: Any) -> Row:
        """The check as a row of scenario ``conformance`` (``identity``: model, title, format, precision...)."""
        fields = {"model": self.deployment, "deployment": self.deployment, **identity, "scenario": "conformance"}
        row = Row(status=STATUS[self.verdict], reasons=[self.reason] if self.reason else [],
                  seconds=round(self.seconds, 3), **fields)
        row.extra.update({"check": self.check, "declared": self.declared, "observed": self.observed,
                          "verdict": self.verdict, "evidence": self.evidence, "declared_fields": self.fields})
        return row


@dataclass
class Target:
    """A deployment loaded on a running server: ``directory`` is its repository directory as served (the checks
    read its config.pbtxt, or without one the configuration the server completed, and its version directories; the
    reload check adds a version there and restores it).
    ``inputs(batch_size, seed)`` gives one request's tensors (default: :meth:`generated`); ``batch_size`` is the
    load requests' batch; ``allow_reload`` lets the reload check change a server the suite did not start
    (remote)."""

    server: Any  # tritonsuite.server.TritonServer
    directory: Path
    inputs: Callable[[int, int], Mapping[str, np.ndarray]] | None = None
    batch_size: int = 1
    allow_reload: bool = False
    #: a python (BLS) deployment's callees (``--bls-composing-models``): its configuration does not name them
    composing: tuple[str, ...] = ()
    #: outputs padded within a batch ({name: axis of the answer, batch first where batched}; ModelSpec's
    #: ``valid_length``): frames of an answer past its request's own extent there are padding, not its result
    padded_axes: Mapping[str, int] = field(default_factory=dict)
    #: what the deployment declares: its config.pbtxt with Triton's defaults where it is silent (instance counts:
    #: core.description.as_served), or without one the configuration the server completed. A caller that holds it
    #: (the suite's Deployment.declared) gives it; else it is read from ``directory`` and the server
    description: ModelDescription | None = None

    @classmethod
    def of(cls, server, deployment, batch_size: int = 1, allow_reload: bool = False) -> "Target":
        """The target of a deployment the run serves (``tritonsuite.deploy.deployment.Deployment``): its directory
        and what it declares as the run holds them, its spec's example inputs (a batchless one's as one sample), its
        callees where it is a python model, its outputs' padded axes."""
        from tritonsuite.load.client import as_sent

        inputs, batched = deployment.spec.example_inputs, deployment.batched  # batch first
        callees = tuple(m.name for m in deployment.description.composing) if deployment.description.python else ()
        padded = {o.name: o.valid_length[1] + batched for o in deployment.spec.outputs if o.valid_length}
        return cls(server, deployment.directory, lambda b, seed=0: as_sent(inputs(b if batched else 1, seed), batched),
                   batch_size, allow_reload, callees, padded, deployment.declared)

    def __post_init__(self):
        self.directory = Path(self.directory)
        self.description = self.description or self._read()
        if self.inputs is None:
            self.inputs = self.generated

    def _read(self) -> ModelDescription:
        """What the deployment declares, read from its directory (and the server's defaults where it is silent)."""
        from tritonsuite.core.description import as_served
        from tritonsuite.deploy.repository import describe_deployment

        if not self.declared:
            return self.server.model_description(self.directory.name, tuple(self.composing))
        found = describe_deployment(self.directory, tuple(self.composing))
        try:
            served = self.server.model_description(self.directory.name, tuple(self.composing))
        except Exception:  # not loaded (a check that starts its own server), no server: the file alone
            return found
        return as_served(found, served)

    def load_requests(self, count: int = 32) -> list[dict[str, np.ndarray]]:
        """The requests a check's load cycles through: one, or ``count`` distinct ones (never sent before by this
        process) where the response cache would otherwise answer the repeats."""
        if not self.description.response_cache:
            return [self.request(self.batch_size)]
        return [self.fresh_request(self.batch_size) for _ in range(count)]

    def fresh_request(self, batch_size: int = 1) -> dict[str, np.ndarray]:
        """A request this process has not sent before (another seed each call): one the response cache has not
        seen."""
        return self.request(batch_size, next(_LOAD_SEEDS))

    @property
    def name(self) -> str:
        return self.description.name

    @property
    def driver(self):
        """The deployment's driver (:func:`tritonsuite.load.kinds.driver_for`): how its requests are sent."""
        from tritonsuite.load.kinds import driver_for

        return driver_for(self.description)

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.description.outputs]

    @property
    def declared(self) -> bool:
        """Whether the deployment ships a config.pbtxt (else the server auto-completed its configuration: what is
        declared is then what the server completed)."""
        return (self.directory / "config.pbtxt").is_file()

    def generated(self, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
        """perf_analyzer's random data of the declared dtypes and dims (:func:`tritonsuite.core.inputdata.generated`,
        the suite's one input generator; a variable dim 1), drawn from ``seed``: a step of its own per row of the
        batch, so the rows differ; a batchless deployment's request is one step (no batch dimension)."""
        from tritonsuite.core.inputdata import generated
        from tritonsuite.load.client import as_sent

        inputs, batched = self.description.inputs, self.description.batching
        shapes = {t.name: tuple(max(d, 1) for d in t.shape) for t in inputs}
        rows = batch_size if batched else 1
        return as_sent(generated("random", inputs, shapes, seed, steps=rows).batch(rows), batched)

    def request(self, batch_size: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
        """One request's tensors of ``batch_size`` (no batch dimension for a batchless deployment)."""
        found = {k: np.ascontiguousarray(v) for k, v in self.inputs(max(batch_size, 1), seed).items()}
        if not self.description.batching:
            return found
        return {k: v[:batch_size] for k, v in found.items()}

