"""The seeds' published tables (tritonsuite.core.published): complete, internally consistent, loadable, and joined to
measured rows in the report, all on CPU with recorded rows."""
from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path

import pytest

from tests.helpers import points_of
from tritonsuite.core.published import (COLUMNS, PUBLISHED_PARAMETER, PublishedError, available_gpus, join,
                                   load_published, load_table, published_configurations)
from tritonsuite.core.rows import LATENCY_PARTS, Row
from tritonsuite.core.store import RawWriter, raw_path
from tritonsuite.report import render_markdown, write_reports

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"  # the seed documents, beside the checkout on the project's machines

# Rows per (gpu, model), counted from the seeds independently of the transcription: the results-table lines of the
# markdown seeds (grep) and the 15-cell groups of TFT's flattened tables. FastPitch: 2 precisions x (4 batch sizes
# + 16 concurrencies); nnU-Net: 2 x (3 + 8); TFT: 2 formats x 2 datasets x (11 + 32); Wide & Deep: 2 x (9 + 32);
# BERT: 4 configurations x 3 batch sizes, less batch 16 of ONNX Runtime + TensorRT on the A30 and the T4 (not
# published).
EXPECTED_ROWS = {
    ("a100", "bert"): 12, ("a100", "fastpitch"): 40, ("a100", "nnunet"): 22, ("a100", "tft"): 172,
    ("a100", "wide_deep"): 82,
    ("a30", "bert"): 11, ("a30", "tft"): 172, ("a30", "wide_deep"): 82,
    ("a40", "fastpitch"): 40, ("a40", "nnunet"): 22,
    ("t4", "bert"): 11, ("t4", "fastpitch"): 40, ("t4", "nnunet"): 22, ("t4", "tft"): 172, ("t4", "wide_deep"): 82,
    ("v100", "bert"): 12, ("v100", "fastpitch"): 40, ("v100", "nnunet"): 22, ("v100", "tft"): 172,
    ("v100", "wide_deep"): 82,
}
FORMATS = ("ts-trace", "ts-script", "onnx", "trt", "savedmodel")


def test_every_seed_gpu_has_its_tables_and_every_published_row_is_there():
    assert available_gpus() == ["a100", "a30", "a40", "t4", "v100"]
    counts = {}
    for row in load_published():
        counts[(row.gpu, row.model)] = counts.get((row.gpu, row.model), 0) + 1
    assert counts == EXPECTED_ROWS
    assert sum(counts.values()) == 1310


@pytest.mark.parametrize("gpu, model", sorted(EXPECTED_ROWS))
def test_published_rows_are_labelled_and_consistent(gpu, model):
    rows = load_table(gpu, model)
    for row in rows:
        labels, r = row.labels, row.result
        assert (row.gpu, row.model) == (gpu, model), row.where
        assert row.format in FORMATS and row.precision in ("fp16", "fp32"), row.where
        assert labels["Source"].split(":")[0] in {p.name for p in SEEDS.glob("*.txt")} or not SEEDS.is_dir()
        assert labels["GPU"].startswith("NVIDIA ") and labels["Max batch size"] and \
            labels["Number of model instances"], row.where
        assert 1 <= row.batch <= int(labels["Max batch size"]), row.where
        # percentiles ordered as published
        percentiles = [r[c] for c in ("p50 latency", "p90 latency", "p95 latency", "p99 latency") if r[c] is not None]
        assert percentiles == sorted(percentiles), (row.where, percentiles)
        # throughput against Little's law (batch x requests in flight / latency): a digit dropped or shifted in
        # transcription moves it by 10x; the seeds themselves stay within 0.72..1.07 (T4 TFT online at the top of
        # its concurrency sweep is the low end)
        expected = row.batch * row.concurrency * 1000.0 / r["avg latency"]
        assert 0.65 <= r["Inferences/Second"] / expected <= 1.15, (row.where, r["Inferences/Second"], expected)
        # where the breakdown is published, its seven parts add up to the average latency (within 5%, or the
        # 0.35 ms that rounding each part to 0.1 ms can leave, as TFT's are)
        parts = [r[c] for c in LATENCY_PARTS]
        if None not in parts:
            assert math.isclose(sum(parts), r["avg latency"], rel_tol=0.05, abs_tol=0.35), (row.where, parts)
        else:  # offline FastPitch and nnU-Net publish throughput and percentiles only
            assert row.scenario == "offline" and model in ("fastpitch", "nnunet"), row.where


def _transcriber():
    spec = importlib.util.spec_from_file_location("transcribe", ROOT / "fixtures" / "published" / "transcribe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed documents are not at {SEEDS}")
def test_the_committed_tables_are_the_seeds_transcription(tmp_path):
    transcribe = _transcriber()
    written = transcribe.write(transcribe.transcribe(SEEDS), tmp_path)
    assert len(written) == len(EXPECTED_ROWS)
    for path in written:
        shipped = ROOT / "src" / "tritonsuite" / "core" / "published" / path.parent.name / path.name
        assert path.read_text() == shipped.read_text(), f"{shipped} differs from the seeds: rerun the transcription"


def test_published_values_as_the_seeds_print_them():
    # spot checks against the seeds' text, one per layout
    bert = {(r.format, r.accelerator, r.batch): r for r in load_table("a30", "bert")}
    assert bert[("onnx", "trt", 8)].result["Inferences/Second"] == 252.0  # 004: A30, ORT + TensorRT, batch 8
    assert ("onnx", "trt", 16) not in bert  # not published
    tft = [r for r in load_table("t4", "tft") if r.size == "large-traffic" and r.format == "ts-trace"
           and r.scenario == "online" and r.concurrency == 256]
    assert len(tft) == 1 and tft[0].batch == 16
    fastpitch = [r for r in load_table("a40", "fastpitch") if r.scenario == "offline" and r.precision == "fp32"]
    assert [(r.batch, r.result["Inferences/Second"], r.result["p99 latency"]) for r in fastpitch] == [
        (1, 83.3, 12.814), (2, 197, 13.14), (4, 320.8, 14.722), (8, 439.2, 18.63)]
    assert fastpitch[0].result["p50 latency"] is None  # not published offline
    assert "Concurrency not published" in fastpitch[0].labels["Note"]
    nnunet = [r for r in load_table("a100", "nnunet") if r.scenario == "online" and r.precision == "fp32"]
    assert nnunet[5].result["p99 latency"] == 411.775 and "Batch not published" in nnunet[5].labels["Note"]
    wide_deep = load_table("v100", "wide_deep")
    assert {(r.format, r.precision, r.accelerator) for r in wide_deep} == {("savedmodel", "fp32", "amp"),
                                                                          ("trt", "fp16", "none")}


def test_unknown_tables_and_malformed_csv_are_one_line_errors(tmp_path):
    with pytest.raises(PublishedError, match=r"no published tables for GPU 'h100'; valid choices: a100, a30, a40"):
        load_table("h100", "bert")
    with pytest.raises(PublishedError, match=r"no published table for 'bert' on a40; valid choices: fastpitch, "
                                             r"nnunet"):
        load_table("a40", "bert")
    shutil.copytree(ROOT / "src" / "tritonsuite" / "core" / "published" / "a40", tmp_path / "a40")
    path = tmp_path / "a40" / "nnunet.csv"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(",offline,", ",offlne,", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PublishedError, match=r"nnunet\.csv:4: scenario 'offlne'; valid choices: offline, online") \
            as error:
        load_table("a40", "nnunet", tmp_path)
    assert "\n" not in str(error.value)
    path.write_text("gpu,model\n")
    with pytest.raises(PublishedError, match=r"nnunet\.csv:1: header is not the published columns"):
        load_table("a40", "nnunet", tmp_path)
    fast = tmp_path / "a40" / "fastpitch.csv"
    fast.write_text(fast.read_text().replace(",83.3,", ",83,3,", 1))
    with pytest.raises(PublishedError, match=rf"fastpitch\.csv:\d+: {len(COLUMNS) + 1} cells; expected {len(COLUMNS)}"):
        load_table("a40", "fastpitch", tmp_path)


# ---------------------------------------------------------------------------------------------------- the join
A100 = "NVIDIA A100-SXM4-80GB (driver 550.54.15, CUDA 12.4)"
H100 = "NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0)"


def measured(model="fastpitch", size="large", scenario="offline", fmt="ts-trace", precision="fp16", batch=8,
             concurrency=1, gpu=A100, published="a100", instances=2, max_batch=8, accelerator="-",
             throughput=760.0, p99=11.0, status="OK", profile="a100") -> Row:
    """A recorded row as Suite.parameters writes it on a GPU profile."""
    parameters = {"GPU": gpu, "Backend": "pytorch", "Backend accelerator": accelerator,
                  "Precision": precision.upper(), "Max batch size": max_batch,
                  "Number of model instances": instances, "Model": f"{model}:{size} ({model}, the seed's shape)",
                  "Profile": profile}
    if published:
        parameters[PUBLISHED_PARAMETER] = published
    return Row(scenario=scenario, model=model, title=model, format=fmt, precision=precision, status=status,
               deployment=f"{model}_{size}_{fmt}_{precision}_{scenario}".replace("-", "_"), batch=batch,
               concurrency=concurrency, parameters=parameters,
               result={"Batch": batch, "Concurrency": concurrency, "Inferences/Second": throughput,
                       "p99 latency": p99, "avg latency": p99 * 0.9} if status == "OK" else {},
               run_id="run1", timestamp="2026-11-24T10:00:00+00:00")


def test_a_measured_row_joins_its_published_row_with_ratios():
    match = join(measured())
    assert match is not None and match.same_gpu is True
    assert "000_a05501836336c82b.txt: Offline: NVIDIA DGX A100 (1x A100 80GB) with FP16" == \
        match.published.labels["Source"]
    assert (match.published_throughput, match.published_p99) == (844.0, 10.027)  # the seed's batch-8 row
    assert match.throughput_ratio == pytest.approx(760.0 / 844.0)
    assert match.p99_ratio == pytest.approx(11.0 / 10.027)
    online = join(measured(scenario="online", batch=1, concurrency=16, precision="fp32", published="a40",
                           gpu="NVIDIA A40 (driver 550)"))
    assert online.published_throughput == 411.4 and online.published_gpu == "NVIDIA A40"
    traffic = join(measured(model="tft", size="large-traffic", batch=1024, instances=2, max_batch=1024,
                            published="t4", gpu="Tesla T4 (driver 535)"))
    assert "Dataset: traffic" in traffic.published.labels["Configuration"] and traffic.same_gpu is True


def test_a_row_joins_only_its_own_configuration_and_point():
    assert join(measured(published="")) is None  # a CPU profile names no tables: never joined
    assert join(measured(batch=3)) is None  # no published point
    assert join(measured(instances=1)) is None  # another instance count is another deployment
    assert join(measured(size="cpu")) is None  # the suite's CPU-size model is not the seed's
    assert join(measured(model="bert", fmt="onnx", batch=8, max_batch=16, instances=1)) is not None
    assert join(measured(model="bert", fmt="onnx", batch=8, max_batch=16, instances=1,
                         accelerator="TensorRT")).published.accelerator == "trt"
    assert join(measured(model="bert", fmt="onnx", batch=16, max_batch=16, instances=1, published="a30",
                         accelerator="TensorRT")) is None  # the seed did not publish it
    assert join(measured(model="wide_deep", size="full", fmt="onnx", precision="fp32", batch=16384,
                         max_batch=131072)) is None  # TensorFlow SavedModel rows are not an ONNX deployment's


def test_a_different_gpu_still_joins_and_says_so():
    h100 = join(measured(gpu=H100, profile="h100"))
    assert h100.same_gpu is False and h100.published_gpu == "NVIDIA DGX A100 (1x A100 80GB)"
    remote = join(measured(gpu="NVIDIA A100 80GB (as the profile names it; the server is not on this host)"))
    assert remote.same_gpu is None


def test_the_report_shows_published_figures_beside_the_measured_ones(tmp_path):
    rows = [measured(batch=b, throughput=t, p99=p) for b, t, p in ((1, 150.0, 7.0), (8, 760.0, 11.0))]
    rows.append(measured(batch=3, throughput=400.0, p99=9.0))  # measured, not published
    page = render_markdown("fastpitch", "offline", points_of(rows), plots=[])
    section = page.split("### Published figures: ")[1]
    heading = section.splitlines()[0]
    assert heading == "NVIDIA DGX A100 (1x A100 80GB)"  # measured on an A100: no warning
    assert "| Batch | Concurrency | Inferences/Second | Published Inferences/Second | Throughput ratio " \
           "| p99 latency (ms) | Published p99 latency (ms) | p99 ratio | Status |" in \
           section.replace("   ", " ").replace("  ", " ").replace("  ", " ")
    table = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("|")][2:]
    assert [[c.strip() for c in r] for r in table] == [
        ["1", "1", "150.0", "152.3", "0.98", "7.0", "7.4", "0.94", "OK"],
        ["8", "1", "760.0", "844.0", "0.90", "11.0", "10.0", "1.10", "OK"]]
    assert "1 measured row(s) of this deployment have no published point." in section


def test_the_report_heading_says_when_the_gpu_is_not_the_published_one(tmp_path):
    rows = [measured(gpu=H100, profile="h100", batch=b) for b in (1, 8)]
    page = render_markdown("fastpitch", "offline", points_of(rows), plots=[])
    heading = next(line for line in page.splitlines() if line.startswith("### Published figures"))
    assert heading == f"### Published figures: NVIDIA DGX A100 (1x A100 80GB) — MEASURED ON A DIFFERENT GPU ({H100})"
    assert "with profile h100, not on the published NVIDIA DGX A100 (1x A100 80GB): the ratios compare two GPUs" in page


def test_no_published_section_for_cpu_runs_and_a_reason_when_nothing_matches(tmp_path):
    cpu = render_markdown("fastpitch", "offline", points_of([measured(published="", gpu="none (CPU: AMD EPYC)")]),
                          plots=[])
    assert "Published" not in cpu
    other = render_markdown("fastpitch", "offline", points_of([measured(instances=1)]), plots=[])
    assert "No published row matches this deployment in the seeds' a100 tables (published for fastpitch: " \
           "offline large ts-trace fp16, max batch size 8, 2 instance(s);" in other
    assert "offline large ts-trace fp16, max batch size 8, 2 instance(s)" in published_configurations("a100",
                                                                                                     "fastpitch")


def test_write_reports_joins_recorded_rows(tmp_path):
    writer = RawWriter(raw_path(tmp_path, "online", "run1"))
    for c, t in ((1, 80.0), (16, 550.0)):
        writer.append(measured(scenario="online", batch=1, concurrency=c, throughput=t, p99=40.0, published="a40",
                               gpu="NVIDIA A40 (driver 550)", precision="fp16", profile="a40"))
    writer.append(measured(scenario="online", batch=1, concurrency=4, status="FAILED", published="a40",
                           gpu="NVIDIA A40 (driver 550)", profile="a40"))
    page = next(p for p in write_reports(tmp_path, "run1") if p.name == "fastpitch.md").read_text()
    section = page.split("### Published figures: NVIDIA A40\n")[1]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines() if line.startswith("|")][2:]
    assert rows == [["1", "1", "80.0", "82.1", "0.97", "40.0", "13.5", "2.95", "OK"],
                    ["1", "4", "-", "173.0", "-", "-", "32.4", "-", "FAILED"],
                    ["1", "16", "550.0", "560.8", "0.98", "40.0", "38.2", "1.05", "OK"]]


def test_a_gpu_profiles_rows_name_their_profile_and_published_tables(tmp_path):
    """Suite.parameters writes the join key: a GPU profile's rows carry "Published tables", a CPU profile's do not."""
    from types import SimpleNamespace

    from tritonsuite.models import default_registry
    from tritonsuite.profiles import load_profile
    from tritonsuite.deploy.deployment import Deployment
    from tritonsuite.run.suite import Suite

    (tmp_path / "mine.yaml").write_text("device: gpu\ngpu: NVIDIA A100 80GB\npublished: a100\nmodels: {bert: {size: "
                                        "tiny, formats: [onnx], precisions: [fp16], max_batch_size: 4}}\n")
    server = SimpleNamespace(local=False, name="remote", version=lambda: "2.51.0", describe=lambda: "gpu-host:8000",
                             provenance=lambda: "remote")
    from tritonsuite.core.description import describe
    from tritonsuite.deploy.repository import model_config

    registry = default_registry()
    name, spec = "bert_tiny_onnx_fp16_offline", registry.get("bert", "tiny")
    config = model_config(name, spec, "onnx", max_batch_size=4, instance_kind="KIND_GPU")
    deployment = Deployment(name, spec, SimpleNamespace(format="onnx", precision="fp16", key="0" * 64,
                                                        max_abs_error={}), config, tmp_path, "onnxruntime",
                            describe(config), describe(config))
    for profile, expected in ((load_profile("mine", tmp_path), "a100"), (load_profile("cpu"), None)):
        suite = Suite(profile, registry, server, tmp_path, tmp_path, tmp_path, run_id="r")
        params = suite.parameters(deployment)
        assert params["Profile"] == profile.name and params.get(PUBLISHED_PARAMETER) == expected
        assert params["Model"].startswith("bert:tiny ")  # the size the join reads
