"""The same perf_analyzer input-data JSON drives the pinned perf_analyzer 2.51 against the hand-written stock
repository on the real embedded server (its validation_data checked by perf_analyzer itself), over HTTP and gRPC;
a validation_data mismatch makes perf_analyzer fail too. (perf_analyzer 2.51 refuses validation_data for an output
with a dynamic dim, "needs to have its shape fully defined", even with --shape: ts_pool's output is fixed. It
compares expected outputs byte for byte, so the file holds them as torch computes them; at -b 2 it reported a
mismatch on this file, so the check runs at -b 1.)"""
import json
import subprocess

import pytest

from tests.test_user_repository import FIXTURE, _make
from tritonsuite.deploy import userserve
from tritonsuite.profiles import repooptions
from tritonsuite.server import EmbeddedServer

pytestmark = pytest.mark.smoke


def _run(pa, url, protocol, data, extra=()):
    argv = [str(pa.binary), "-m", "ts_pool", "-u", url, "-i", protocol, "-b", "1", "--input-data", str(data),
            "--shape", "INPUT__0:3,4", "--concurrency-range", "1:1", "--measurement-interval", "300", "--max-trials", "4",
            "--stability-percentage", "100", *extra]
    return subprocess.run(argv, env=pa.environment(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_the_same_json_drives_perf_analyzer(tmp_path, pa):
    repo = _make(tmp_path)
    specs, _, _ = repooptions.user_models(repo, {"ts_pool": str(FIXTURE / "ts_pool.json")}, only=("ts_pool",))
    bad = tmp_path / "bad.json"
    doc = json.loads((FIXTURE / "ts_pool.json").read_text())
    doc["validation_data"][1]["OUTPUT__0"]["content"][2] += 0.25
    bad.write_text(json.dumps(doc))
    with EmbeddedServer(tmp_path / "served", tmp_path / "logs") as server:
        userserve.load(specs[0], server, tmp_path / "served", {})
        for protocol, url in (("http", server.http_url), ("grpc", server.grpc_url)):
            good = _run(pa, url, protocol, FIXTURE / "ts_pool.json")
            assert good.returncode == 0, good.stdout + good.stderr
            assert "Throughput:" in good.stdout, good.stdout
        wrong = _run(pa, server.http_url, "http", bad)
    assert wrong.returncode != 0, wrong.stdout
    assert "Output doesn't match expected output" in wrong.stdout + wrong.stderr, wrong.stdout + wrong.stderr
