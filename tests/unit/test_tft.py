import functools
import os
import zipfile

import numpy as np
import pytest

from tritonsuite.models import datasets
from tritonsuite.models.datasets import DatasetError
from tritonsuite.deploy.export import export
from tritonsuite.models import default_registry, tft
from tritonsuite.models.training import trained_checkpoint, training_stats

SEED_INPUTS = ["s_cat__0", "s_cont__1", "k_cat__2", "k_cont__3", "o_cat__4", "o_cont__5", "target__6", "id__7"]


def _write_csv(path, hours=tft.TEST_HOURS + 120, names=("b", "a")):
    stamps = np.datetime64("2021-03-01T00") + np.arange(hours).astype("timedelta64[h]")
    lines = ["series,timestamp,value"]
    for k, name in enumerate(names):
        values = 100 * (k + 1) + 10 * np.sin(2 * np.pi * np.arange(hours) / 24)
        lines += [f"{name},{s},{v:.3f}" for s, v in zip(stamps, values)]
    path.write_text("\n".join(lines[:1] + lines[1:][::-1]) + "\n")  # rows in any order
    return path


def test_q_risk_on_hand_computed_values():
    actual, forecast = np.array([10.0, 20.0]), np.array([14.0, 19.0])  # errors y - f: -4, +1; sum |y| = 30
    assert tft.q_risk(forecast, actual, 0.5) == pytest.approx(2 * (2.0 + 0.5) / 30)
    assert tft.q_risk(forecast, actual, 0.1) == pytest.approx(2 * (0.9 * 4 + 0.1 * 1) / 30)
    assert tft.q_risk(forecast, actual, 0.9) == pytest.approx(2 * (0.1 * 4 + 0.9 * 1) / 30)
    assert tft.q_risk(actual, actual, 0.9) == 0.0


def test_seasonal_naive_repeats_the_value_a_day_or_a_week_earlier():
    history = np.arange(168, dtype=float)[None, :]
    assert (tft.seasonal_naive(history, 24)[0] == np.arange(144, 168)).all()
    assert (tft.seasonal_naive(history, 168)[0] == np.arange(0, 24)).all()
    assert tft.naive_seasons(168) == {"day": 24, "week": 168} and tft.naive_seasons(72) == {"day": 24}
    with pytest.raises(ValueError, match="season 168 must lie in"):
        tft.seasonal_naive(history[:, :72], 168)


def test_known_inputs_are_hour_day_of_week_and_position():
    known = tft.known_inputs(np.datetime64("2000-06-05T00"), 168)  # a Monday, midnight
    assert known.shape == (168, 3) and known.dtype == np.float32
    assert known[0].tolist() == [-0.5, -0.5, 0.0]
    assert known[-1].tolist() == [0.5, 0.5, 1.0]  # Sunday 23:00, last step
    assert known[25, 0] == pytest.approx(1 / 23 - 0.5) and known[25, 1] == pytest.approx(1 / 6 - 0.5)


def test_csv_loader_and_windows(tmp_path):
    series = tft.load_csv(_write_csv(tmp_path / "load.csv"))
    assert [s.name for s in series] == ["a", "b"] and all(len(s.values) == tft.TEST_HOURS + 120 for s in series)
    history, length = 24, 24 + tft.HORIZON
    train, test = tft.make_windows(series, history, "train"), tft.make_windows(series, history, "test")
    per_series_train = tft.TEST_HOURS + 120 - tft.TEST_HOURS - length + 1
    per_series_test = tft.TEST_HOURS - tft.HORIZON + 1
    assert len(train.actual) == 2 * per_series_train and len(test.actual) == 2 * per_series_test
    spec = default_registry().get("tft", "tiny")
    for t in spec.inputs:
        assert test.inputs[t.name].shape == (len(test.actual),) + t.shape and test.inputs[t.name].dtype == t.dtype
    # the static series index is repeated over time; the target is normalised by the training part's mean/std
    a = series[0].values
    mean, std = a[:-tft.TEST_HOURS].mean(), a[:-tft.TEST_HOURS].std()
    assert (test.inputs["s_cat__0"][:per_series_test] == 0).all() and (test.inputs["s_cat__0"][per_series_test:] == 1).all()
    first = test.inputs["target__6"][0, :, 0]
    start = len(a) - tft.TEST_HOURS - history
    np.testing.assert_allclose(first * std + mean, a[start:start + length], rtol=1e-5)
    np.testing.assert_array_equal(test.actual[0], a[len(a) - tft.TEST_HOURS:][:tft.HORIZON])
    # no training horizon reaches into the held-out hours; every test horizon lies inside them
    last_train_target = train.inputs["target__6"][per_series_train - 1, history:, 0] * std + mean
    np.testing.assert_allclose(last_train_target, a[-tft.TEST_HOURS - tft.HORIZON:-tft.TEST_HOURS], rtol=1e-5)
    np.testing.assert_array_equal(test.actual[per_series_test - 1], a[-tft.HORIZON:])


@pytest.mark.parametrize("content, message", [
    ("time,value\n2021-01-01T00,1\n", "lacks the columns series,timestamp,value"),
    ("series,timestamp,value\na,2021-01-01T00,1\na,2021-01-01T02,1\n", "series 'a' is not hourly and gap-free"),
    ("series,timestamp,value\na,yesterday,1\n", "line 2: bad timestamp or value 'yesterday'"),
])
def test_csv_loader_names_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        tft.load_csv(path)


def test_too_short_a_series_is_refused(tmp_path):
    series = tft.load_csv(_write_csv(tmp_path / "short.csv", hours=tft.TEST_HOURS + 10))
    with pytest.raises(DatasetError, match="needs at least"):
        tft.make_windows(series, 24, "train")


def test_built_in_series_is_read_hourly_from_the_fetched_wheel_and_the_pin_is_enforced(tmp_path, monkeypatch):
    values = np.arange(4032, dtype=float) + 20000  # pmdarima's taylor.py holds its half-hourly values in one list
    source = f"import numpy as np\nrslt = {values.tolist()}\n".encode()
    wheel = tmp_path / "pmdarima-2.1.1-cp311-cp311-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(tft.TAYLOR_MEMBER, source)

    def download(dest):  # stands in for `pip download` (no network in unit tests)
        (dest / wheel.name).write_bytes(wheel.read_bytes())

    monkeypatch.setattr(tft, "wheel_member", functools.partial(datasets.wheel_member, cache=tmp_path / "cache",
                                                               download=download))
    with pytest.raises(DatasetError, match=f"expected {tft.TAYLOR_SHA256}"):  # the shipped pin is what is checked
        tft.load_taylor_hourly()
    monkeypatch.setattr(tft, "TAYLOR_SHA256", datasets.sha256_of(source))
    series = tft.load_taylor_hourly()
    assert len(series.values) == 2016 and series.values[0] == 20000.5 and series.start == tft.TAYLOR_START
    with pytest.raises(DatasetError, match="no data list found"):
        tft.parse_taylor_source(b"rslt = [1, 2, 3]")


@pytest.mark.parametrize("size", list(tft.SIZES))
def test_signature_is_the_seeds(size):
    spec = default_registry().get("tft", size)
    cfg = tft.SIZES[size]
    length = cfg["history"] + tft.HORIZON
    assert [t.name for t in spec.inputs] == SEED_INPUTS
    shapes = {t.name: (t.dtype, t.shape) for t in spec.inputs}
    assert shapes["s_cat__0"] == ("int64", (length, 1)) and shapes["k_cont__3"] == ("float32", (length, 3))
    assert shapes["target__6"] == ("float32", (length, 1)) and shapes["id__7"] == ("int64", (length, 1))
    assert all(shapes[n][1] == (1,) for n in ("s_cont__1", "k_cat__2", "o_cat__4", "o_cont__5"))
    assert [(t.name, t.dtype, t.shape) for t in spec.outputs] == [("target__0", "float32", (24, 3))]
    example = spec.example_inputs(3, 0)
    assert {n: (a.dtype.name, a.shape[1:]) for n, a in example.items()} == {n: (d, s) for n, (d, s) in shapes.items()}


def test_large_sizes_are_the_seeds_electricity_and_traffic_configurations():
    for size, series in (("large", 369), ("large-traffic", 963)):
        cfg = tft.SIZES[size]
        assert (cfg["hidden"], cfg["heads"], cfg["history"], cfg["num_series"]) == (128, 4, 168, series)


def test_forecast_reads_no_future_target_and_is_causal_over_the_horizon():
    import torch

    spec = default_registry().get("tft", "tiny")
    model = spec.build(None)
    history = tft.SIZES["tiny"]["history"]
    inputs = spec.example_inputs(2, 0)

    def run(x):
        with torch.no_grad():
            return model(*(torch.from_numpy(x[n]) for n in SEED_INPUTS))[0].numpy()

    base = run(inputs)
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["target__6"][:, history:] = 100.0  # the future the model must not see
    changed["id__7"][:] = 5
    np.testing.assert_array_equal(run(changed), base)
    late = {k: v.copy() for k, v in inputs.items()}
    late["k_cont__3"][:, -1] += 1.0  # a known input at the last horizon step changes only that step's forecast
    out = run(late)
    np.testing.assert_allclose(out[:, :-1], base[:, :-1], atol=1e-6)
    assert not np.allclose(out[:, -1], base[:, -1])
    history_changed = {k: v.copy() for k, v in inputs.items()}
    history_changed["target__6"][:, 0] += 1.0
    assert not np.allclose(run(history_changed), base)


@pytest.mark.parametrize("fmt", ["ts-trace", "onnx", "ts-script"])
def test_exports_match_eager(fmt, tmp_path):
    spec = default_registry().get("tft", "tiny")
    artifact = export(spec, fmt, "fp32", tmp_path)  # raises ExportMismatch beyond 1e-4 at batch 1 and 3
    assert artifact.max_abs_error["target__0"] <= 1e-4 and artifact.verified_batch_sizes == (1, 3)


def test_training_on_a_user_csv_is_cached_and_changes_the_forecast(tmp_path):
    spec = default_registry().get("tft", "tiny")
    data = _write_csv(tmp_path / "load.csv")
    checkpoint = trained_checkpoint(spec, tmp_path / "cache", data)
    stamp = os.stat(checkpoint).st_mtime_ns
    assert trained_checkpoint(spec, tmp_path / "cache", data) == checkpoint and os.stat(checkpoint).st_mtime_ns == stamp
    stats = training_stats(checkpoint)
    assert stats["steps"] == tft.TRAINING["tiny"]["steps"] and np.isfinite(stats["final_loss"])
    accuracy = spec.accuracy_data(data, checkpoint)
    import torch

    trained, untrained = spec.build(checkpoint), spec.build(None)
    with torch.no_grad():
        args = [torch.from_numpy(accuracy.inputs[n]) for n in SEED_INPUTS]
        forecast = trained(*args)[0].numpy()
        assert not np.allclose(forecast, untrained(*args)[0].numpy())
    metrics = {m.name: m for m in accuracy.score({"target__0": forecast}, {"target__0": forecast}, "fp32")}
    assert metrics["q_risk_P50_relative_to_eager"].value == 0.0 and metrics["q_risk_P50_relative_to_eager"].passed
    assert np.isfinite(metrics["q_risk_P50"].value)


def test_a_checkpoint_of_another_size_is_refused(tmp_path):
    import torch

    model = tft.build_network(tft.SIZES["tiny"])
    path = tmp_path / "tiny.pt"
    torch.save({"state_dict": model.state_dict(), "config": dict(tft.SIZES["tiny"])}, path)
    with pytest.raises(ValueError, match="size 'cpu' needs"):
        default_registry().get("tft", "cpu").build(path)


def test_a_dataset_with_more_series_than_the_size_embeds_is_refused(tmp_path):
    spec = default_registry().get("tft", "tiny")
    data = _write_csv(tmp_path / "many.csv", names=[f"s{i}" for i in range(17)])
    with pytest.raises(DatasetError, match="17 series; TFT size 'tiny' embeds at most 16"):
        spec.train(data, tmp_path / "ckpt.pt")
