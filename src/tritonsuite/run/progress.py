"""Progress a person can watch while points are measured, as a terminal or a log shows it. The library tells a
``progress`` callback how a point, a search, a mix or a tune is going (:data:`tritonsuite.load.point.Progress`:
a line, with how many of its teller's steps are done of at most how many where it knows them, a ``ProgressLine``);
this decides how it is shown and draws it. The pytest plugin (:mod:`tritonsuite.plugin.progress`) wires it:

- **a terminal** (stdout a TTY, not CI, tests in this process, default verbosity): a bar (tqdm) on its own line under
  the running test's, counting the point's windows (of at most ``max_trials``), a search's points, a mix's steps or a
  tune's configurations, with the latest line beside it, cut to the terminal's width; removed when the test ends,
  the cursor put back where the test's line was, so pytest's dots go on there;
- **a log** (CI, as pytest decides it: ``CI`` or ``BUILD_NUMBER`` set; stdout not a TTY; or xdist): one line per
  point as it ends, from the test's figures (:func:`point_line`);
- **-v**: each step's line under the running test, and the line per point; **-q**: nothing.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

from tqdm import tqdm


def running_on_ci() -> bool:
    """pytest's own rule (its output is not truncated there either)."""
    return any(os.environ.get(name) for name in ("CI", "BUILD_NUMBER"))


def choose_display(verbose: int, terminal: bool, here: bool) -> str:
    """"none" (-q), "bar" (a terminal at default verbosity, not CI, the tests running in this process: ``here``)
    or "lines"."""
    if verbose < 0:
        return "none"
    return "bar" if verbose == 0 and terminal and here and not running_on_ci() else "lines"


class _Tqdm(tqdm):
    monitor_interval = 0  # drawn only when told: no monitor thread drawing while the test's output is captured


class Bar:
    """A tqdm bar on the line under the one a terminal writer is on (``column``: how far along that line it is),
    drawn only inside ``uncaptured()`` (a test's output capture stepped out of); :meth:`close` removes it and puts
    the cursor back at the end of that line."""

    def __init__(self, name: str, uncaptured: Callable[[], AbstractContextManager], column: Callable[[], int]):
        self.name, self.uncaptured, self.column = name, uncaptured, column
        self.bar: _Tqdm | None = None
        self.at = 0

    def __call__(self, line: str) -> None:
        done, total = getattr(line, "done", None), getattr(line, "total", None)  # a ProgressLine's count
        with self.uncaptured():
            if self.bar is None:
                self.at = self.column()
                sys.stdout.write("\n")
                self.bar = _Tqdm(total=total, desc=self.name, file=sys.stdout, leave=False, dynamic_ncols=True,
                                 miniters=1, bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}| {elapsed}{postfix}")
            if total is not None:
                self.bar.total = total
            if done is not None:
                self.bar.n = done
            self.bar.set_postfix_str(line, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is None:
            return
        with self.uncaptured():
            self.bar.close()  # leave=False: the bar's line is cleared, the cursor at its start
            sys.stdout.write(f"\x1b[1A\x1b[{self.at + 1}G")  # up to the writer's line, where it was
            sys.stdout.flush()
        self.bar = None


#: the scenario tests whose verdict is a measured point, a search, a mix or a tune
POINT_TESTS = ("test_offline", "test_online", "test_mix", "test_tune")


def numbered_point_line(nodeid: str, outcome: str = "", duration: float = 0.0, figures: dict | None = None,
                        k: int = 0, n: int = 0, why: str = "") -> str | None:
    """``  [k/N] <point_line>`` of a point test's report (``[k]`` where N is not known), None for another test."""
    name, _, case = nodeid.rpartition("::")[2].partition("[")
    if name not in POINT_TESTS:
        return None
    line = point_line(case.rstrip(']') or name, outcome, duration, figures or {}, why)
    return f"  [{k}{f'/{n}' if n else ''}] {line}"


def point_line(case: str, outcome: str, duration: float, figures: dict, why: str = "") -> str:
    """``bert-onnx-fp32-concurrency8 passed in 14.2 s: 523.1 infer/s, p99 12.34 ms, 812 requests, OK`` for a
    measured point (its figures: :mod:`tritonsuite.run.verdicts`); a search's, tune's or mix's answer otherwise;
    ``why`` where it has neither (a skip's reason)."""
    head = f"{case} {outcome} in {duration:.1f} s"
    if "Inferences/Second" in figures:
        shown = [f"{figures['Inferences/Second']:.1f} infer/s"]
        if figures.get("p99 latency") is not None:
            shown.append(f"p99 {figures['p99 latency']:.2f} ms")
        if figures.get("measured_requests") is not None:
            shown.append(f"{figures['measured_requests']} requests")
        return f"{head}: {', '.join(shown + [str(figures.get('status', ''))])}"
    if figures.get("answer"):
        return f"{head}: {figures['answer']}"
    ratios = [f"{name[len('ratio '):]} {value}" for name, value in figures.items() if name.startswith("ratio ")]
    return f"{head}: {'; '.join(ratios) or why}" if ratios or why else head
