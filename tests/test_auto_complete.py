"""Auto-completion of configurations on the embedded server: off where each configuration the run serves is complete
as written (the python backend's auto-complete costs the stand-ins a stub and a 1 s sleep a load), on where one
needs it, and what turning it off would lose: a python model's own ``auto_complete_config``."""
import json
import shutil
import urllib.request

from tritonsuite.deploy.userrepo import completion_needed
from tritonsuite.run.options import resolve_options
from tritonsuite.server import EmbeddedServer

from tests.helpers import plugin_options

ONNX_CONFIG = '''name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [{{ name: "x" data_type: TYPE_FP32 dims: [1] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [1] }}]
'''

#: a python model whose configuration declares its tensors but no batching: its auto_complete_config sets both
COMPLETING_CONFIG = '''name: "completes"
backend: "python"
input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]
'''
COMPLETING_MODEL = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())])
                for r in requests]
'''


def _onnx(directory):
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 1])])
    (directory / "1").mkdir(parents=True)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(directory / "1" / "model.onnx"))


def _complete(repo, name="passthrough"):
    _onnx(repo / name)
    (repo / name / "config.pbtxt").write_text(ONNX_CONFIG.format(name=name))


def _completing(repo):
    (repo / "completes" / "1").mkdir(parents=True)
    (repo / "completes" / "config.pbtxt").write_text(COMPLETING_CONFIG)
    (repo / "completes" / "1" / "model.py").write_text(COMPLETING_MODEL)


def test_a_repository_says_which_deployment_needs_completion(tmp_path):
    repo = tmp_path / "repo"
    _complete(repo)
    assert completion_needed(repo) is None
    _onnx(repo / "bare")  # shipped without config.pbtxt
    assert completion_needed(repo) == "bare ships no config.pbtxt"
    (repo / "bare" / "config.pbtxt").write_text('name: "bare"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n')
    assert completion_needed(repo) == "bare's config.pbtxt declares no inputs or outputs"
    shutil.rmtree(repo / "bare")
    _completing(repo)
    assert completion_needed(repo) == "completes/1/model.py completes its own configuration"


def test_the_run_turns_completion_off_only_where_nothing_needs_it(tmp_path):
    complete, completing = tmp_path / "complete", tmp_path / "completing"
    _complete(complete)
    _completing(completing)
    _complete(completing)
    own = resolve_options(plugin_options(), tmp_path)  # the suite's own deployments: complete, written by it
    assert not own.auto_complete and own.launcher_options()["auto_complete"] is False
    assert not resolve_options(plugin_options(model_repository=[str(complete)]), tmp_path).auto_complete
    assert resolve_options(plugin_options(model_repository=[str(completing)]), tmp_path).auto_complete
    backends = tmp_path / "backends"
    (backends / "onnxruntime").mkdir(parents=True)  # the user's own backends may complete what the stand-ins leave
    (backends / "onnxruntime" / "libtriton_onnxruntime.so").write_bytes(b"")  # as written: Triton's default
    assert resolve_options(plugin_options(model_repository=[str(complete)], backend_directory=str(backends)),
                           tmp_path).auto_complete
    flags = EmbeddedServer(complete, tmp_path / "logs", auto_complete=False)
    assert "--disable-auto-complete-config" in flags._completion_arguments()
    flags.extra_args = ("--strict-model-config=true",)  # the user's own say wins
    assert flags._completion_arguments() == ()


def test_off_a_model_s_own_completion_is_lost_so_a_repository_with_one_keeps_it_on(tmp_path):
    """Why completion_needed looks for auto_complete_config: the served configuration differs without it."""
    served = {}
    for auto_complete in (True, False):
        repo = tmp_path / f"repo-{auto_complete}"
        _completing(repo)
        _complete(repo)
        with EmbeddedServer(repo, tmp_path / f"logs-{auto_complete}", auto_complete=auto_complete) as server:
            for name in ("completes", "passthrough"):
                server.load(repo / name)
                with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{name}/config", timeout=10) as answer:
                    served[auto_complete, name] = json.load(answer)
            assert ("--disable-auto-complete-config" in server.arguments().extra) is not auto_complete
    assert served[True, "completes"]["max_batch_size"] == 4 and "dynamic_batching" in served[True, "completes"]
    assert served[False, "completes"]["max_batch_size"] == 0 and "dynamic_batching" not in served[False, "completes"]
    for key in ("max_batch_size", "input", "output", "platform", "backend", "instance_group"):  # complete: the same
        assert served[True, "passthrough"][key] == served[False, "passthrough"][key], key
