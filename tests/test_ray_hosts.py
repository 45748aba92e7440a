"""``--workers ray:ADDRESS`` across hosts, on one machine: the test makes network namespaces of its own (veth links on
a bridge, addresses of its own test network), starts the Triton server in one, a Ray head and two Ray worker nodes
in three others (Ray's token authentication, each node bound to its namespace's address), and drives points from
the head's namespace across them. The merged row of three actors on three hosts agrees with one process's row at
the same load by the suite's own comparison statistics. Everything it starts is killed and removed after, also on
failure: every process in its namespaces, the namespaces, the links.

Needs root (network namespaces) and the distributed extra; skipped with the reason otherwise."""
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import assert_same_point
from tests.netns import USABLE, WHY_NOT, Namespaces

if importlib.util.find_spec("ray") is None:
    pytest.skip("the distributed extra (pip install 'tritonsuite[distributed]')", allow_module_level=True)
if not USABLE:
    pytest.skip(WHY_NOT, allow_module_level=True)

HOSTS = ("srv", "head", "w1", "w2")
START_S = 120  # the longest a node or the server may take to come up


SERVER = textwrap.dedent('''
    import sys
    from pathlib import Path
    from tests.kinds import _write
    from tests.test_workers import CONFIG, SLEEPY
    from tritonsuite.server import EmbeddedServer

    repo, logs, address = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    directory = _write(repo / "sleepy", CONFIG, "model.py", SLEEPY)
    with EmbeddedServer(repo, logs, address=address) as server:
        server.load(directory)
        print("READY", server.http_url, flush=True)
        sys.stdin.read()  # until the test closes it
''')

DRIVER = textwrap.dedent('''
    import json, sys
    import numpy as np
    from tests.helpers import pairs_until_alike
    from tests.test_workers import FAST, _pair
    from tritonsuite.core.settings import RayWorkers
    from tritonsuite.core.spec import TensorSpec
    from tritonsuite.load import sources
    from tritonsuite.load.engine import LoadPoint, Traffic
    from tritonsuite.server import RemoteServer

    url, head, out = sys.argv[1], sys.argv[2], sys.argv[3]
    server = RemoteServer(url)
    traffic = Traffic("sleepy", {"INPUT": np.zeros((1, 1), np.int32)}, [TensorSpec("OUTPUT", "int32", (1,))],
                      LoadPoint(1, 6), server.model_description("sleepy"))
    source = sources.get("suite", RayWorkers(head))
    assert source.unavailable() is None
    pairs = pairs_until_alike(lambda: _pair(sources.get("suite").measure(server, traffic, FAST),
                                            source.measure(server, traffic, FAST), "ray"))
    one, many, _ = pairs[0]
    json.dump({"one": [one.status, one.reasons], "many": [many.status, many.reasons, many.meta["workers"],
               many.meta["measured_requests"], many.meta["requests_sent"], many.meta["server_success_delta"]],
               "pairs": [list(compared) for _, _, compared in pairs]}, open(out, "w"), default=str)
''')


@contextlib.contextmanager
def _removed(path: Path):
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _wait_for(proc: subprocess.Popen, log: Path, word: str) -> str:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        for line in text.splitlines():
            if line.startswith(word) or (word != "READY" and word in line):
                return line
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[3:6]} ended ({proc.returncode}): {text[-2000:]}")
        time.sleep(0.2)
    raise AssertionError(f"{proc.args[3:6]} not {word} within {START_S} s: {log.read_text(errors='replace')[-2000:]}")


def test_three_ray_actors_on_three_hosts_give_one_process_s_row(tmp_path):
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).strip(os.pathsep),
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))  # the cluster's token, shared
    ray_bin = str(Path(sys.executable).parent / "ray")
    short = Path(tempfile.mkdtemp(prefix="tsray", dir="/tmp"))  # Ray's socket paths must stay under 108 bytes
    with Namespaces(HOSTS) as net, _removed(short):
        a = net.address
        server = net.start("srv", [sys.executable, "-c", SERVER, str(tmp_path / "repo"), str(tmp_path), a["srv"]],
                           env, tmp_path / "server.log")
        url = _wait_for(server, tmp_path / "server.log", "READY").split()[1]
        common = ["--block", "--num-cpus", "1", "--object-store-memory", str(80 * 2 ** 20), "--disable-usage-stats"]
        head = net.start("head", [ray_bin, "start", "--head", "--node-ip-address", a["head"], "--port", "6379",
                                  "--include-dashboard", "false", "--temp-dir", str(short), *common],
                         env, tmp_path / "head.log")
        address = f"{a['head']}:6379"
        _wait_for(head, tmp_path / "head.log", "Ray runtime started")
        for host in ("w1", "w2"):
            node = net.start(host, [ray_bin, "start", "--address", address, "--node-ip-address", a[host], *common],
                             env, tmp_path / f"{host}.log")
            _wait_for(node, tmp_path / f"{host}.log", "Ray runtime started")
        out = tmp_path / "result.json"
        driver = subprocess.run(net.argv("head", [sys.executable, "-c", DRIVER, url, address, str(out)]), env=env,
                                capture_output=True, text=True, timeout=600, cwd=root)
        assert driver.returncode == 0, driver.stdout[-3000:] + driver.stderr[-3000:]
        result = json.loads(out.read_text())
    assert net.gone()  # every process in the namespaces killed, the namespaces and links removed
    status, reasons, workers, measured, sent, counted = result["many"]
    assert result["one"][0] == status == "OK", (result["one"], reasons)
    per = workers["per_worker"]
    assert sorted(w["host"] for w in per) == sorted([a["head"], a["w1"], a["w2"]]) == workers["hosts"]
    assert [w["slots"] for w in per] == [2, 2, 2] and all(w["requests"] > 0 for w in per)
    assert sum(w["requests"] for w in per) == measured and sent == counted
    for w in per:  # one machine's clock behind three namespaces: each offset within its own uncertainty (+ 1 ms)
        assert abs(w["clock_offset_ms"]) <= w["clock_uncertainty_ms"] + 1.0, w
    assert 1 <= len(result["pairs"]) <= 2  # the first pair, or a second after a busy spell set the first apart
    assert_same_point(*result["pairs"][-1])
