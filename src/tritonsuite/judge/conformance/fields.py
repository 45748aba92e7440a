"""Every field of Triton's ``ModelConfig`` (``model_config.proto`` of r24.10, as tritonclient ships it) and the check
that shows it at work on a live server, or why it cannot be shown from outside the server.

:data:`FIELDS` is the table (``docs/conformance.md`` prints it; ``tests/unit/test_conformance_fields.py`` keeps the
two and :data:`~tritonsuite.judge.conformance.CHECKS` in step with the protobuf: a field of the proto without a row,
a row naming no check and giving no reason, a check named by no row fails). :func:`declared_fields` lists the
fields one configuration sets, so a deployment's report can read as a checklist of its own fields.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

#: why a group of fields cannot be shown from outside the server
_TRT = "TensorRT only (tensorrt_plan); TensorRT cannot be installed from the registries these hosts reach"
_GPU = "GPU memory and stream handling: no effect a client can tell apart on a CPU host (a GPU run shows latency only)"
_INSIDE = "changes how the backend runs the model inside the server, not what a client sees (speed only)"
_CONTROL_VALUE = ("the value the server gives a control reaches the model alone and shows only in its answers, "
                  "which the deployment's accuracy judges; the sequence check shows the server fills the control")

#: field path -> (check that shows it, what it shows) or ("", why it cannot be shown from outside)
FIELDS: dict[str, tuple[str, str]] = {
    "name": ("identity", "served under its directory's name"),
    "platform": ("identity", "the served platform"),
    "backend": ("identity", "the served backend"),
    "runtime": ("identity", "the served configuration's runtime"),
    "version_policy": ("identity", "READY versions are those the policy selects from the version directories"),
    "version_policy.latest": ("identity", "the newest num_versions versions READY"),
    "version_policy.latest.num_versions": ("identity", "as many READY versions"),
    "version_policy.all": ("identity", "every version directory READY"),
    "version_policy.specific": ("identity", "exactly the named versions READY"),
    "version_policy.specific.versions": ("identity", "exactly the named versions READY"),
    "max_batch_size": ("batching", "no execution above it; a request above it refused (refusals)"),
    "input": ("identity", "the served inputs"),
    "input.name": ("identity", "the served input names; a missing input refused (refusals)"),
    "input.data_type": ("identity", "the served dtypes; another dtype refused (refusals)"),
    "input.format": ("", "a layout hint for image inputs; the onnxruntime and pytorch backends ignore it"),
    "input.dims": ("identity", "the served dims; another shape refused (refusals)"),
    "input.reshape": ("tensors", "a request of the declared dims answered, one of the reshaped shape refused"),
    "input.reshape.shape": ("tensors", "a request of the declared dims answered, one of this shape refused"),
    "input.is_shape_tensor": ("", _TRT),
    "input.allow_ragged_batch": ("ragged", "requests of different shapes batched together only when allowed"),
    "input.optional": ("tensors", "a request without an optional input answered, without a required one refused"),
    "input.is_non_linear_format_io": ("", _TRT),
    "output": ("identity", "the served outputs"),
    "output.name": ("identity", "the served output names; an unknown output refused (refusals)"),
    "output.data_type": ("identity", "answers of the declared dtypes"),
    "output.dims": ("identity", "answers of the declared dims"),
    "output.reshape": ("tensors", "answers of the declared dims (the reshape undone)"),
    "output.reshape.shape": ("tensors", "answers of the declared dims (the reshape undone)"),
    "output.label_filename": ("classification", "the classification extension answers with the file's labels"),
    "output.is_shape_tensor": ("", _TRT),
    "output.is_non_linear_format_io": ("", _TRT),
    "batch_input": ("", "the server fills it inside each execution; it shows only through a model written to return "
                        "it, and requests of different shapes batched together show in ragged"),
    "batch_input.kind": ("", "as batch_input"),
    "batch_input.target_name": ("", "as batch_input"),
    "batch_input.data_type": ("", "as batch_input"),
    "batch_input.source_input": ("", "as batch_input"),
    "batch_output": ("", "splits a ragged execution's output back per request inside the server; answers of each "
                         "request's own shape are what accuracy compares"),
    "batch_output.target_name": ("", "as batch_output"),
    "batch_output.kind": ("", "as batch_output"),
    "batch_output.source_input": ("", "as batch_output"),
    "optimization": ("", _INSIDE),
    "optimization.graph": ("", _INSIDE),
    "optimization.graph.level": ("", _INSIDE + " (onnxruntime's graph optimisation level)"),
    "optimization.priority": ("", "the instances' thread priority on the host: not visible to a client"),
    "optimization.cuda": ("", _GPU),
    "optimization.cuda.graphs": ("", _GPU),
    "optimization.cuda.busy_wait_events": ("", _GPU),
    "optimization.cuda.graph_spec": ("", _GPU),
    "optimization.cuda.graph_spec.batch_size": ("", _GPU),
    "optimization.cuda.graph_spec.input": ("", _GPU),
    "optimization.cuda.graph_spec.graph_lower_bound": ("", _GPU),
    "optimization.cuda.graph_spec.graph_lower_bound.batch_size": ("", _GPU),
    "optimization.cuda.graph_spec.graph_lower_bound.input": ("", _GPU),
    "optimization.cuda.output_copy_stream": ("", _GPU),
    "optimization.execution_accelerators": ("", _INSIDE + " (the backend's execution providers)"),
    "optimization.execution_accelerators.gpu_execution_accelerator": ("", _INSIDE),
    "optimization.execution_accelerators.gpu_execution_accelerator.name": ("", _INSIDE),
    "optimization.execution_accelerators.gpu_execution_accelerator.parameters": ("", _INSIDE),
    "optimization.execution_accelerators.cpu_execution_accelerator": ("", _INSIDE),
    "optimization.execution_accelerators.cpu_execution_accelerator.name": ("", _INSIDE),
    "optimization.execution_accelerators.cpu_execution_accelerator.parameters": ("", _INSIDE),
    "optimization.input_pinned_memory": ("", _GPU),
    "optimization.input_pinned_memory.enable": ("", _GPU),
    "optimization.output_pinned_memory": ("", _GPU),
    "optimization.output_pinned_memory.enable": ("", _GPU),
    "optimization.gather_kernel_buffer_threshold": ("", _GPU),
    "optimization.eager_batching": ("", _TRT),
    "dynamic_batching": ("batching", "executions of more than one request under load"),
    "dynamic_batching.preferred_batch_size": ("batching", "executions at a preferred size, none above the largest"),
    "dynamic_batching.max_queue_delay_microseconds": ("batching", "queue time within the delay plus the executions "
                                                                  "a request waits for"),
    "dynamic_batching.preserve_ordering": ("ordering", "responses in the order the requests arrived"),
    "dynamic_batching.priority_levels": ("priority", "a higher level served before earlier lower ones"),
    "dynamic_batching.default_priority_level": ("priority", "a request without a priority served at this level"),
    "dynamic_batching.default_queue_policy": ("queue_policy", "the queue's limits and timeouts enforced"),
    "dynamic_batching.default_queue_policy.timeout_action": ("queue_policy", "REJECT refuses, DELAY answers later"),
    "dynamic_batching.default_queue_policy.default_timeout_microseconds": ("queue_policy",
                                                                          "a request queued longer times out"),
    "dynamic_batching.default_queue_policy.allow_timeout_override": ("queue_policy",
                                                                    "a request's own timeout honoured only if allowed"),
    "dynamic_batching.default_queue_policy.max_queue_size": ("queue_policy", "requests beyond it refused"),
    "dynamic_batching.priority_queue_policy": ("queue_policy", "each level's own policy enforced"),
    "sequence_batching": ("sequence", "requests need a correlation id and START; sequences batched (batching)"),
    "sequence_batching.direct": ("batching", "the slots with a request ready batched together"),
    "sequence_batching.direct.max_queue_delay_microseconds": ("batching", "the direct batcher's wait for a fuller "
                                                                          "batch"),
    "sequence_batching.direct.minimum_slot_utilization": ("", "bounded by the direct queue delay (batching); the "
                                                              "fraction itself does not show apart from it"),
    "sequence_batching.oldest": ("batching", "the oldest sequences' requests batched across sequences"),
    "sequence_batching.oldest.max_candidate_sequences": ("sequence", "sequences beyond it wait in the backlog"),
    "sequence_batching.oldest.preferred_batch_size": ("batching", "executions at a preferred size"),
    "sequence_batching.oldest.max_queue_delay_microseconds": ("batching", "the oldest batcher's wait"),
    "sequence_batching.oldest.preserve_ordering": ("", "the oldest strategy runs a batcher per instance and r24.10 "
                                                       "keeps the order within each only (28 of 73 pairs reversed "
                                                       "with it served): no order across a deployment to judge"),
    "sequence_batching.max_sequence_idle_microseconds": ("sequence", "an idle sequence released after it"),
    "sequence_batching.control_input": ("sequence", "the server fills them: a client never sends them"),
    "sequence_batching.control_input.name": ("sequence", "the server fills them: a client never sends them"),
    "sequence_batching.control_input.control": ("sequence", "the server fills them: a client never sends them"),
    "sequence_batching.control_input.control.kind": ("sequence", "START, END, READY, CORRID as the server sets them"),
    "sequence_batching.control_input.control.int32_false_true": ("", _CONTROL_VALUE),
    "sequence_batching.control_input.control.fp32_false_true": ("", _CONTROL_VALUE),
    "sequence_batching.control_input.control.bool_false_true": ("", _CONTROL_VALUE),
    "sequence_batching.control_input.control.data_type": ("", _CONTROL_VALUE),
    "sequence_batching.state": ("state", "state carried from one request of a sequence to the next, never across"),
    "sequence_batching.state.input_name": ("state", "as state"),
    "sequence_batching.state.output_name": ("state", "as state"),
    "sequence_batching.state.data_type": ("state", "as state"),
    "sequence_batching.state.dims": ("state", "as state"),
    "sequence_batching.state.initial_state": ("state", "every sequence starts from it: one sent again after others "
                                                       "answers as the first time"),
    "sequence_batching.state.initial_state.data_type": ("state", "as initial_state"),
    "sequence_batching.state.initial_state.dims": ("state", "as initial_state"),
    "sequence_batching.state.initial_state.zero_data": ("state", "as initial_state"),
    "sequence_batching.state.initial_state.data_file": ("state", "as initial_state"),
    "sequence_batching.state.initial_state.name": ("state", "as initial_state"),
    "sequence_batching.state.use_same_buffer_for_input_output": ("", _GPU),
    "sequence_batching.state.use_growable_memory": ("", _GPU),
    "sequence_batching.iterative_sequence": ("", "iterative scheduling is for backends that reschedule a request "
                                                 "(generative models); the stock onnxruntime and pytorch backends "
                                                 "do not"),
    "ensemble_scheduling": ("steps", "each ensemble request runs each step once"),
    "ensemble_scheduling.step": ("steps", "each ensemble request runs each step once"),
    "ensemble_scheduling.step.model_name": ("steps", "the named model's statistics count the ensemble's requests"),
    "ensemble_scheduling.step.model_version": ("steps", "the named version (-1: the latest) runs the step"),
    "ensemble_scheduling.step.input_map": ("steps", "the ensemble's answer is its steps' composed (accuracy)"),
    "ensemble_scheduling.step.output_map": ("steps", "the ensemble's answer is its steps' composed (accuracy)"),
    "ensemble_scheduling.step.model_namespace": ("", "takes effect only on a server started with "
                                                     "--model-namespacing"),
    "ensemble_scheduling.max_inflight_requests": ("", "bounds the steps' work queued inside the server; no counter "
                                                      "or answer of r24.10 shows it"),
    "instance_group": ("instances", "executions overlap as the instances declared"),
    "instance_group.name": ("", "a label of the group; no counter or answer names it"),
    "instance_group.kind": ("instances", "the served kind (KIND_GPU needs a GPU host)"),
    "instance_group.count": ("instances", "executions overlap as the count declares"),
    "instance_group.rate_limiter": ("rate_limiter", "on a server with --rate-limit execution_count: no more "
                                                    "instances execute at once than the resources admit"),
    "instance_group.rate_limiter.resources": ("rate_limiter", "as rate_limiter"),
    "instance_group.rate_limiter.resources.name": ("rate_limiter", "as rate_limiter"),
    "instance_group.rate_limiter.resources.global": ("rate_limiter", "as rate_limiter"),
    "instance_group.rate_limiter.resources.count": ("rate_limiter", "as rate_limiter"),
    "instance_group.rate_limiter.priority": ("", "a weight of scheduling chances between instances; the statistics "
                                                 "extension counts executions per model, not per instance"),
    "instance_group.gpus": ("", _GPU + " (which GPU runs an instance)"),
    "instance_group.secondary_devices": ("", "NVDLA cores for TensorRT; " + _TRT),
    "instance_group.secondary_devices.kind": ("", _TRT),
    "instance_group.secondary_devices.device_id": ("", _TRT),
    "instance_group.profile": ("", _TRT),
    "instance_group.passive": ("", "a passive instance loads but is never scheduled; nothing outside tells it from "
                                   "a missing one but the instance count (instances judges the active ones)"),
    "instance_group.host_policy": ("", "NUMA placement on the host: not visible to a client"),
    "default_model_filename": ("identity", "the deployment loads and answers from that file"),
    "cc_model_filenames": ("", _GPU + " (a file per GPU compute capability)"),
    "metric_tags": ("", "reserved in r24.10: the server reads no tag"),
    "parameters": ("", "read by the backend: onnxruntime reads intra_op_thread_count, inter_op_thread_count, "
                       "execution_mode, enable_mem_arena, enable_mem_pattern, memory.enable_memory_arena_shrinkage "
                       "...; pytorch DISABLE_OPTIMIZED_EXECUTION, INFERENCE_MODE, INTRA_OP_THREAD_COUNT, "
                       "INTER_OP_THREAD_COUNT, ENABLE_CACHE_CLEANING ...: speed only (reload checks a changed "
                       "parameter is served)"),
    "model_warmup": ("warmup", "the first request after a load as fast as the steady state"),
    "model_warmup.name": ("warmup", "as model_warmup"),
    "model_warmup.batch_size": ("warmup", "as model_warmup"),
    "model_warmup.inputs": ("warmup", "as model_warmup"),
    "model_warmup.count": ("warmup", "as model_warmup"),
    "model_operations": ("", "TensorFlow custom operations; no TensorFlow backend here"),
    "model_operations.op_library_filename": ("", "as model_operations"),
    "model_transaction_policy": ("decoupled", "as decoupled"),
    "model_transaction_policy.decoupled": ("decoupled", "each stream ends with exactly one final response"),
    "model_repository_agents": ("", "act on the repository when the model loads (checksum, encryption): a failed "
                                    "agent fails the load, which identity shows, and no more"),
    "model_repository_agents.agents": ("", "as model_repository_agents"),
    "model_repository_agents.agents.name": ("", "as model_repository_agents"),
    "model_repository_agents.agents.parameters": ("", "as model_repository_agents"),
    "response_cache": ("cache", "as response_cache.enable"),
    "response_cache.enable": ("cache", "a repeated request answered from the cache, identically"),
    "model_metrics": ("", "histogram buckets of metrics off by default (--metrics-config histogram_latencies=true)"),
    "model_metrics.metric_control": ("", "as model_metrics"),
    "model_metrics.metric_control.metric_identifier": ("", "as model_metrics"),
    "model_metrics.metric_control.metric_identifier.family": ("", "as model_metrics"),
    "model_metrics.metric_control.histogram_options": ("", "as model_metrics"),
    "model_metrics.metric_control.histogram_options.buckets": ("", "as model_metrics"),
}

#: checks that judge the deployment as a whole rather than one field: what each shows
SYSTEM: dict[str, str] = {
    "refusals": "malformed requests refused cleanly; the deployment unharmed",
    "counters": "the statistics extension and Prometheus metrics agree with the client",
    "reload": "a new version and a changed configuration loaded under load without a failed request",
    "shutdown": "a server asked to shut down answers the requests in flight and exits (a twin of an embedded one)",
    "test01": "outputs sampled under load equal the same inputs sent alone (MLPerf TEST01)",
    "test04": "one input repeated is not faster than varied inputs without a declared cache (MLPerf TEST04)",
    "test05": "throughput does not depend on the input seed (MLPerf TEST05)",
}


def proto_fields() -> list[str]:
    """Every field path of ``ModelConfig``, depth first (a map or a recursive message is one leaf)."""
    from tritonclient.grpc import model_config_pb2

    found: list[str] = []

    def walk(descriptor, prefix: str, seen: tuple[str, ...]) -> None:
        for f in descriptor.fields:
            found.append(prefix + f.name)
            message = f.message_type
            if message is not None and not message.GetOptions().map_entry and message.full_name not in seen:
                walk(message, f"{prefix}{f.name}.", seen + (message.full_name,))

    root = model_config_pb2.ModelConfig.DESCRIPTOR
    walk(root, "", (root.full_name,))
    return found


def declared_fields(config: Mapping[str, Any]) -> list[str]:
    """The field paths one configuration (JSON, protobuf field names) sets, in the table's order."""
    found = set(_paths(config, ""))
    return [f for f in FIELDS if f in found]


def _paths(value: Any, prefix: str) -> Iterator[str]:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, Mapping):
            continue  # pragma: no mutate (equivalent: a configuration's list holds mappings only or scalars only)
        for key, inner in item.items():
            path = f"{prefix}{key}"
            if path not in FIELDS:  # a map's keys (parameters, input_map...): the map is the field
                continue
            yield path
            yield from _paths(inner, path + ".")


def checklist(config: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(field, check, what it shows or why not) for every field the configuration sets."""
    return [(f, *FIELDS[f]) for f in declared_fields(config)]
