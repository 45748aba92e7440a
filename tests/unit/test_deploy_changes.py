"""The changes a conformance check makes to a served deployment (tritonsuite.deploy.changes): made on the served
copy, and undone to the byte by restore. The server here only records what it was asked to load; the checks that
use these changes run against the real embedded server in tests/test_conformance_checks.py and
tests/test_conformance_fields.py (reload, warmup, shutdown)."""
from __future__ import annotations

import json

from tritonsuite.deploy.changes import Changes

CONFIG = 'name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 4\n'


class Recorder:
    def __init__(self):
        self.loaded, self.overrides = [], []

    def load(self, directory):
        self.loaded.append(directory.name)

    def client(self, timeout):
        recorder = self

        class Client:
            def load_model(self, name, config):
                recorder.overrides.append((name, json.loads(config)))

            def close(self):
                pass

        return Client()


def _deployment(tmp_path):
    directory = tmp_path / "m"
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.onnx").write_bytes(b"graph")
    (directory / "3").mkdir()
    (directory / "config.pbtxt").write_text(CONFIG)
    return directory


def test_a_version_and_a_marked_config_are_added_then_undone_to_the_byte(tmp_path):
    directory, server = _deployment(tmp_path), Recorder()
    changes = Changes(server, directory)
    assert changes.versions_on_disk() == [1, 3]
    assert changes.add_version("1") == "4" and (directory / "4" / "model.onnx").read_bytes() == b"graph"
    changes.mark_config("tritonsuite_mark")
    assert 'key: "tritonsuite_mark"' in (directory / "config.pbtxt").read_text()
    changes.load()
    changes.restore()
    assert changes.versions_on_disk() == [1, 3] and (directory / "config.pbtxt").read_text() == CONFIG
    assert server.loaded == ["m", "m"]  # the change, then the deployment as it was


def test_a_configuration_loads_through_the_repository_api_and_a_twin_gets_the_callees_first(tmp_path):
    directory, server, twin = _deployment(tmp_path), Recorder(), Recorder()
    (tmp_path / "callee").mkdir()
    changes = Changes(server, directory)
    changes.load_config("m", {"name": "m", "parameters": {"x": {"string_value": "1"}}})
    assert server.overrides == [("m", {"name": "m", "parameters": {"x": {"string_value": "1"}}})]
    changes.load_beside(["callee", "absent"], twin)
    changes.load(twin)
    assert twin.loaded == ["callee", "m"] and server.loaded == []  # a model not in the repository is not asked for
