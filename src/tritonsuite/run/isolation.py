"""Fault isolation: one broken deployment costs only its own cases.

A run drives one deployment at a time (per pytest process or xdist worker). When the server is found dead, the
deployment that was being driven (loaded, measured, checked) when it died is given up: its later cases fail at
once, naming the cause; the server is started again (a fresh process over the same repository) and every other
deployment is loaded again when its next case comes, as if the broken one had not been there. A deployment whose
requests went unanswered past the hang bound (:class:`~tritonsuite.load.point.Hang`), or whose python stub is gone,
is given up the same way, and unloaded so its stuck instances hold nothing the others need; the server lives on.

A remote server is not ours to restart: its death fails the rest of the run, in one line per case.

What was given up and every restart are kept in ``<reports>/raw/faults/<run>-<worker>.jsonl`` (one JSON object a
line, :func:`tritonsuite.core.store.faults_path`), which the manifest, ``summary.md`` and the terminal summary read.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tritonsuite.core.access import redact
from tritonsuite.core.store import faults_path
from tritonsuite.load.point import Hang
from tritonsuite.server.base import ServerError, TritonServer

__all__ = ["GivenUp", "Isolation", "faults_path", "gives_up"]


def gives_up(exc: BaseException | str) -> bool:
    """Whether an error means the deployment cannot answer any later case either: a hang past the bound, or its
    python-backend stub gone (Triton answers "Stub process '<instance>' is not healthy" from then on)."""
    text = str(exc)
    return (isinstance(exc, Hang) or text.startswith(("Hang", "TimeoutError"))
            or ("Stub process" in text and "is not healthy" in text))


class GivenUp(ServerError):
    """A deployment given up earlier in this run; its later cases fail at once with this."""


@dataclass
class Isolation:
    """The run's record of broken deployments and restarts, and the one place that revives a dead server."""

    server: TritonServer
    record_to: Path | None = None  # faults_path(...); None: kept in memory only
    given_up: dict[str, str] = field(default_factory=dict)  # deployment -> why (one line)
    driving: str = ""  # the deployment whose load or traffic went last

    def before(self, deployment: str) -> bool:
        """Called before ``deployment`` is loaded or driven: refuse it if it was given up (GivenUp, with the cause);
        else revive the server if it died (True: it was restarted, nothing is loaded on it any more)."""
        if self.driving == deployment and not self.server.is_alive():
            self._blame()  # it died under this very deployment: no restart for its own later cases
        if deployment in self.given_up:
            raise GivenUp(f"{deployment} was given up earlier in this run: {self.given_up[deployment]}")
        restarted = self.revive()
        self.driving = deployment
        return restarted

    def revive(self) -> bool:
        """If the server is dead: give up the deployment it died under, start it again; True when it did."""
        if self.server.is_alive():
            return False
        if not self.server.restartable:
            raise self.server.died()
        culprit, log = self._blame(), self.server.log_path
        took = self.server.restart()
        line = (f"{self.server.name} server restarted in {took:.1f} s after it died"
                + (f" while {culprit} was driven" if culprit else "") + f" (the dead server's log: {log}; the new "
                f"one's: {self.server.log_path}); the deployments still to run are loaded again")
        self._write("restart", culprit, line)
        return True

    def _blame(self) -> str:
        """The server died: give up the deployment driven when it did (once); returns its name."""
        culprit = self.driving
        if culprit and culprit not in self.given_up and self.server.restartable:
            self.give_up(culprit, f"the server died while it was driven (the server's log: {self.server.log_path})")
        return culprit

    def give_up(self, deployment: str, why: str) -> None:
        """Fail ``deployment``'s later cases at once with ``why``."""
        self.given_up[deployment] = why
        self._write("given_up", deployment, f"{deployment}: {why}")

    def broken(self, deployment: str, model: str, exc: Exception) -> bool:
        """If ``exc`` says ``deployment`` can no longer answer (it hung; its python stub is gone), give it up and
        unload ``model`` (a bounded request; a model whose instance is stuck is left to the server's stop)."""
        if not gives_up(exc):
            return False
        first = (str(exc).strip().splitlines() or [""])[0]
        self.give_up(deployment, first if isinstance(exc, str) else f"{type(exc).__name__}: {first}")
        try:
            self.server.unload(model)
        except Exception:
            pass
        return True

    def _write(self, kind: str, deployment: str, line: str) -> None:
        if self.record_to is None:
            return
        self.record_to.parent.mkdir(parents=True, exist_ok=True)
        with open(self.record_to, "a", encoding="utf-8") as f:
            f.write(redact(json.dumps({"kind": kind, "deployment": deployment, "line": line,
                                       "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})) + "\n")
