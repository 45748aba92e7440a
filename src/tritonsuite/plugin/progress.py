"""Progress on the terminal at ``-v``: the library tells a ``progress`` callback how a point or a search is going
(:func:`tritonsuite.load.windows.progress_line`, :func:`tritonsuite.load.search.search`); this writes each line
under the running test, the way pytest plugins write (the terminal reporter). Nothing without ``-v``, and nothing
under an xdist worker (its output never reaches the terminal while the test runs)."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable


def terminal_progress(config, case_id: str) -> Callable[[str], None] | None:
    """A callback writing ``  <case id> [<elapsed> s] <line>`` to pytest's terminal, or None when nothing is shown."""
    if config.getoption("verbose") < 1 or hasattr(config, "workerinput"):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    capture = config.pluginmanager.get_plugin("capturemanager")
    started = time.monotonic()

    def write(line: str) -> None:
        # output capture holds the test's stdout: step out of it, as pytest's live logging does
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(f"  {case_id} [{time.monotonic() - started:.0f} s] {line}")

    return write
