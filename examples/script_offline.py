"""Using tritonsuite without pytest: an offline sweep and an accuracy check of BERT (tiny) from a script.

    python examples/script_offline.py [reports_dir]
"""
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from tritonsuite.models import default_registry
from tritonsuite.profiles import load_profile, narrow
from tritonsuite.report import write_reports
from tritonsuite.run.suite import Suite
from tritonsuite.server import EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]


def main(reports: Path) -> int:
    profile = narrow(load_profile("cpu"), formats=["onnx"], batch_sizes=[1, 4])
    profile = replace(profile, models={"bert": replace(profile.models["bert"], size="tiny")})  # the smoke-test size
    with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(Path(tmp) / "repo", reports / "logs") as server:
        suite = Suite(profile, default_registry(), server, Path(tmp) / "repo", Path(tmp) / "cache", reports,
                      run_id="script")
        for case in suite.cases("offline"):
            m = suite.run_performance(case)
            print(case.id, m.status, f"{m.result['Inferences/Second']:.1f} inf/s", f"p99 {m.result['p99 latency']:.2f} ms")
        for case in suite.cases("accuracy"):
            result = suite.run_accuracy(case)
            print(case.id, "accuracy", "passed" if result.passed else result.failures)
    for path in write_reports(reports, "script"):
        print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "reports")))
