"""perf_analyzer's input data (both JSON layouts, b64, directories, --shape) and reading stock repositories."""
import base64
import json

import numpy as np
import pytest

from tritonsuite.core import inputdata
from tritonsuite.core.inputdata import InputDataError
from tritonsuite.core.spec import TensorSpec
from tritonsuite.deploy import userrepo

X = TensorSpec("x", "float32", (-1,))
IDS = TensorSpec("ids", "int64", (2,))
Y = TensorSpec("y", "float32", (-1,))


def test_json_in_both_layouts_with_b64_and_validation_round_trips(tmp_path):
    doc = {"data": [{"x": {"content": [1, 2, 3], "shape": [3]}, "ids": [4, 5]},
                    {"x": {"b64": base64.b64encode(np.array([7, 8, 9], "<f4").tobytes()).decode()}, "ids": [1, 2]}],
           "validation_data": [{"y": [3, 5, 7]}, {"y": {"content": [15, 17, 19], "shape": [3]}}]}
    path = tmp_path / "data.json"
    path.write_text(json.dumps(doc))
    data = inputdata.read_json(path, [X, IDS], [Y], shapes={"x": (3,)})
    batch = data.batch(3, 1)  # consecutive steps, wrapping
    assert batch["x"].tolist() == [[7, 8, 9], [1, 2, 3], [7, 8, 9]] and batch["ids"].dtype == np.int64
    assert data.expected()["y"].tolist() == [[3, 5, 7], [15, 17, 19]]
    again = tmp_path / "again.json"
    again.write_text(json.dumps(inputdata.to_json(data)))
    back = inputdata.read_json(again, [X, IDS], [Y])
    assert back.all_steps()["x"].tolist() == data.all_steps()["x"].tolist()
    assert back.expected()["y"].tolist() == data.expected()["y"].tolist()


@pytest.mark.parametrize("doc, message", [
    ({"data": [{"x": [1.0], "ids": [1, 2]}]}, "has dynamic dims"),  # a flat list for a dynamic input needs --shape or "shape"
    ({"data": [{"ids": [1, 2]}]}, "lacks input x"),
    ({"data": [{"x": {"content": [1, 2], "shape": [3]}, "ids": [1, 2]}]}, r"has 2 values, shape \[3\] needs 3"),
    ({"data": [{"x": {"content": [1], "shape": [1]}, "ids": [1, 2]}], "validation_data": [{"z": [1]}]},
     "names z, not an output"),
    ({"rows": []}, "perf_analyzer's layout"),
])
def test_bad_json_is_one_line_naming_the_value(tmp_path, doc, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputDataError, match=message):
        inputdata.read_json(path, [X, IDS], [Y])


def test_random_zero_directory_and_shape():
    data = inputdata.generated("zero", [X, IDS], inputdata.parse_shapes(["x:4"]))
    assert data.batch(2)["x"].shape == (2, 4) and not data.batch(2)["x"].any()
    with pytest.raises(InputDataError, match="give --shape x:N"):
        inputdata.generated("random", [X])
    with pytest.raises(InputDataError, match="expected NAME:d1,d2"):
        inputdata.parse_shapes(["x"])
    with pytest.raises(InputDataError, match="valid choices: random, zero"):
        inputdata.load("nonsense", [X], [Y])


def test_random_data_is_one_reused_step_or_steps_of_their_own_drawn_from_the_seed():
    shapes = inputdata.parse_shapes(["x:4"])
    one = inputdata.generated("random", [X, IDS], shapes, seed=3)
    assert len(one.steps) == 1 and np.array_equal(one.batch(2)["x"][0], one.batch(2)["x"][1])  # perf_analyzer's
    three = inputdata.generated("random", [X, IDS], shapes, seed=3, steps=3)
    assert len(three.steps) == 3 and all(np.array_equal(three.steps[0][k], one.steps[0][k]) for k in ("x", "ids"))
    rows = three.batch(3)["x"]
    assert rows.shape == (3, 4) and len({r.tobytes() for r in rows}) == 3  # a batch of them: rows that differ
    again = inputdata.generated("random", [X, IDS], shapes, seed=3, steps=3)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(three.steps, again.steps) for k in a)  # deterministic
    assert set(np.unique(three.batch(3)["ids"])) <= {0, 1} and 0 <= rows.min() and rows.max() < 1
    zero = inputdata.generated("zero", [X, IDS], shapes, steps=2)
    assert len(zero.steps) == 2 and not zero.batch(2)["x"].any()


def test_directory_form(tmp_path):
    np.array([1, 2, 3], "<f4").tofile(tmp_path / "x")
    np.array([3, 5, 7], "<f4").tofile(tmp_path / "y")
    data = inputdata.load(str(tmp_path), [X], [Y], {"x": (3,)})
    assert data.batch(1)["x"].tolist() == [[1, 2, 3]] and data.expected()["y"].tolist() == [[3, 5, 7]]


def test_repository_reads_drivable_and_lists_the_rest_with_reasons(tmp_path):
    root = userrepo.read_repository.__globals__["Path"](__file__).resolve().parents[2] / "fixtures" / "user_repository"
    import shutil

    shutil.copytree(root, tmp_path / "repo", ignore=shutil.ignore_patterns("*.py", "*.json"))
    (tmp_path / "repo" / "onnx_scale" / "1").mkdir()
    (tmp_path / "repo" / "onnx_scale" / "1" / "model.onnx").write_bytes(b"")
    found, skipped = userrepo.read_repository(tmp_path / "repo")
    assert [d.name for d in found] == ["onnx_scale"]
    dep = found[0]
    assert (dep.format, dep.backend, dep.max_batch_size, dep.inputs) == ("onnx", "onnxruntime", 8, (X,))
    db = dep.description.dynamic_batching
    assert db is not None and db.preferred_batch_sizes == (4,) and db.max_queue_delay_microseconds == 500
    reasons = {u.name: u.reason for u in skipped}
    assert "ensemble" in reasons["pipeline"]
    assert "decoupled" not in reasons["stream"]  # decoupled models are driven (load.streams); this one lacks parts
    assert reasons["ts_pool"].startswith("no version directory the version policy latest {num_versions: 1} selects")
    assert userrepo.parse_tolerances(["y=0.01,0"]) == {"y": (0.01, 0.0)}
    with pytest.raises(userrepo.RepositoryError, match="expected OUTPUT=atol,rtol"):
        userrepo.parse_tolerances(["y=0.01"])
