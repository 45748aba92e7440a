"""The changes a conformance check makes to a served deployment to watch the server take them, made here, on the
deploy floor, so no judge writes a repository or loads a model itself: a version added beside the served ones, a
configuration with a marker parameter written, a configuration loaded through the repository API (config
override), the deployment loaded as it is on disk (on its server, or on a twin the check started), and everything
undone by :meth:`Changes.restore`.

Only the served copy changes: the suite serves a team's deployment from a copy in the run's repository
(:mod:`tritonsuite.deploy.userserve`), never from the team's own directory; a server the suite did not start is
changed only where the check's target allows it (``--allow-reload``).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path


class Changes:
    """One deployment's changes on ``server``, from its served directory ``directory``."""

    def __init__(self, server, directory: str | Path):
        self.server, self.directory = server, Path(directory)
        self.added: Path | None = None
        self._config_text: str | None = None  # config.pbtxt as it was, while a changed one is written

    def load(self, on=None) -> None:
        """Load the deployment as it is on disk, on its server or on ``on`` (a twin the check started)."""
        (on or self.server).load(self.directory)

    def load_beside(self, names, on) -> None:
        """Load the named models of the same repository on ``on`` (a BLS model's callees before it)."""
        for name in names:
            if (self.directory.parent / name).is_dir():
                on.load(self.directory.parent / name)

    def add_version(self, served: str) -> str:
        """Copy version ``served`` to the next version number; its name (removed by :meth:`restore`)."""
        self.added = self.directory / str(max(self.versions_on_disk()) + 1)
        shutil.copytree(self.directory / served, self.added)
        return self.added.name

    def versions_on_disk(self) -> list[int]:
        """The numeric version directories of the deployment, ascending."""
        return sorted(int(p.name) for p in self.directory.iterdir() if p.is_dir() and p.name.isdigit())

    def mark_config(self, parameter: str, value: str = "1") -> None:
        """Write config.pbtxt with ``parameter`` added (the original is written back by :meth:`unmark_config`)."""
        from google.protobuf import text_format

        from tritonsuite.deploy.repository import read_config

        path = self.directory / "config.pbtxt"
        self._config_text = path.read_text()
        changed = read_config(self.directory)
        changed.parameters[parameter].string_value = value
        path.write_text(text_format.MessageToString(changed))

    def unmark_config(self) -> None:
        if self._config_text is not None:
            (self.directory / "config.pbtxt").write_text(self._config_text)
            self._config_text = None

    def load_config(self, name: str, config: dict, timeout_s: float = 600.0) -> None:
        """Load ``name`` with ``config`` (JSON) through the repository API: Triton's config override."""
        conn = self.server.client(timeout=timeout_s)
        try:
            conn.load_model(name, config=json.dumps(config))
        finally:
            conn.close()

    def restore(self) -> None:
        """The deployment as it was: an added version removed, the configuration as written; loaded once more
        (raising what the server answered)."""
        if self.added is not None:
            shutil.rmtree(self.added, ignore_errors=True)
            self.added = None
        self.unmark_config()
        self.load()
