"""`pytest -m conformance` as a user runs it, on a hand-written stock repository (--model-repository): one test per
check and deployment, the rows, the page per deployment, the summary section and the JUnit properties."""
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import raw_rows, run_pytest
from tests.test_user_repository import PROFILE, _args, _make
from tritonsuite.core.spec import path_digest
from tritonsuite.judge.conformance import DEFAULT_CHECKS as CHECKS
from tritonsuite.judge.conformance.fields import FIELDS, SYSTEM

pytestmark = pytest.mark.smoke


def test_conformance_of_a_hand_written_repository(tmp_path):
    repo = _make(tmp_path)
    before = path_digest(repo)
    junit = tmp_path / "junit.xml"
    result = run_pytest(_args(repo, "-m", "conformance", "-rs", f"--junitxml={junit}"), tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [r for r in raw_rows(tmp_path / "reports", "conformance")]
    assert sorted((r["deployment"], r["check"]) for r in rows) == sorted(
        (d, c) for d in ("onnx_scale", "ts_pool") for c in CHECKS)
    verdicts = {(r["deployment"], r["check"]): r["verdict"] for r in rows}
    assert verdicts[("onnx_scale", "cache")] == "skipped"  # its config does not enable the response cache
    # these models answer in well under a millisecond: where this client cannot keep requests waiting for the
    # batcher, batching (and ragged, which reads the same figures) is skipped with Little's-law figures (never
    # failed); a field check skips only where the configuration declares none of its fields; every other check,
    # the system checks among them, passes
    host_bound = [r for r in rows if r["check"] in ("batching", "ragged") and r["verdict"] == "skipped"
                  and "requests waited on average" in r["reasons"][0]]
    skipped = [r for r in rows if r["verdict"] == "skipped"]
    assert all(r in host_bound or r["check"] not in SYSTEM and not any(
        FIELDS[f][0] == r["check"] for f in r["declared_fields"]) for r in skipped), \
        [(r["deployment"], r["check"], r["reasons"]) for r in skipped]
    assert {"queue_policy", "tensors", "sequence", "decoupled", "warmup"} <= {r["check"] for r in skipped}
    assert not [r for r in rows if r["verdict"] == "fail"], \
        [(r["deployment"], r["check"], r["reasons"]) for r in rows if r["verdict"] == "fail"]
    assert f"{len(rows) - len(skipped)} passed, {len(skipped)} skipped" in result.stdout, result.stdout
    assert path_digest(repo) == before  # the reload check wrote to the run's copy, never to the user's repository
    page = (tmp_path / "reports" / "conformance" / "onnx_scale.md").read_text()
    assert "| identity |" in page and "| reload |" in page and "batch size | executions" in page
    assert "## Checklist of the declared fields" in page and "| `dynamic_batching` | batching |" in page
    summary = (tmp_path / "reports" / "summary.md").read_text()
    ts_pool_skipped = sum(r["deployment"] == "ts_pool" for r in skipped)
    assert "## Conformance" in summary and \
        f"- ts_pool: {len(CHECKS) - ts_pool_skipped} passed, 0 failed, {ts_pool_skipped} skipped" in summary
    case = next(c for c in ET.parse(junit).iter("testcase")
                if c.get("name") == "test_conformance[onnx_scale-onnx-fp32-batching]")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["verdict"] == verdicts[("onnx_scale", "batching")] and properties["check"] == "batching"
    assert "histogram" in properties["observed"] and properties["declared"]
