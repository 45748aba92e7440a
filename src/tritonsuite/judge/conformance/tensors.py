"""The tensors' own fields, each shown on the live server with requests sent as the deployment's driver sends them.

- ``tensors``: ``input.optional``: a request without an optional input is answered (each optional input left out in
  turn, then all of them); ``input.reshape``: a request of the declared dims is answered and one shaped as the
  reshape is refused (the server reshapes; a client sends the declared dims); ``output.reshape``: answers come
  back in the declared dims, not the model's own. A missing *required* input is the refusals check's.
- ``classification``: an output with ``label_filename``, asked for as the classification extension's top classes
  (``class_count``), answers ``score:index:label`` strings: the indices are the output's top ones, the scores its
  values there and the labels the file's lines at those indices. Only the labelled output is asked for as classes,
  one request each, the others as tensors; a labelled BYTES (``TYPE_STRING``) output is never asked: tritonserver
  2.51 divides by its zero element size and dies (SIGFPE), so the check says it did not ask instead.
"""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import ask, fits_dims, responses
from tritonsuite.load.http import RequestOptions
from tritonsuite.core.reasons import reason

#: the top classes the classification check asks for (fewer where an output has fewer elements)
CLASSES = 3
#: Triton's words for an output type its classification extension does not serve (r24.10: FP16, BF16, BOOL)
UNSUPPORTED = "class result not available"
#: why a labelled BYTES output is never asked for its classes (tritonserver 2.51's classification path divides by
#: the type's element size, 0 for BYTES, and the server dies of SIGFPE: one request is enough)
NEVER_ASKED = ("not asked: the classification extension of tritonserver 2.51 dies (SIGFPE) on a BYTES output's "
               "class_count")


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("a request without the optional input {} was {}",
           "test_conformance_tensors.py::test_tensors_catches_an_optional_input_served_as_required",
           "unit/test_judge_tensors.py::test_tensors_fails_a_request_without_an_optional_input_refused"),
    reason("a request of the declared dims was {}",
           "test_conformance_tensors.py::test_tensors_catches_a_deployment_served_without_its_reshape",
           "unit/test_judge_tensors.py::test_tensors_fails_a_refused_request_of_the_declared_dims_only_where_a_reshape_"
           "is_declared"),
    reason("input {}: a request shaped as its reshape {} (not its dims {}) was answered",
           "unit/test_judge_tensors.py::test_tensors_fails_an_input_answered_as_its_reshape"),
    reason("output {} answered as {}, declared dims {} (its reshape not undone)",
           "unit/test_judge_tensors.py::test_tensors_fails_an_output_answered_in_the_models_own_dims"),
    reason("the reference request was {}",
           "test_conformance_tensors.py::test_classification_fails_a_deployment_that_refuses_its_reference_request"),
    reason("output {} asked for its top {} classes was {}",
           "unit/test_judge_tensors.py::test_classification_fails_a_refused_request_for_classes"),
    reason("output {}: class {} carries no label (score:index:label expected, label_filename {})",
           "test_conformance_tensors.py::test_classification_catches_an_output_served_without_its_labels",
           "unit/test_judge_tensors.py::test_classification_fails_a_class_that_carries_no_label"),
    reason("output {}: class {}: line {} of {} is {}",
           "unit/test_judge_tensors.py::test_classification_fails_a_label_that_is_not_the_files_line_at_its_index"),
    reason("output {}: class {}: the output's value at {} is {}",
           "unit/test_judge_tensors.py::test_classification_fails_a_score_that_is_not_the_outputs_value"),
    reason("output {}: classes {} answered, its top {} are {}",
           "unit/test_judge_tensors.py::test_classification_fails_classes_that_are_not_the_top_ones"),
)


def _declared(config: dict, kind: str, field: str) -> dict:
    """{tensor name: the field's value} for the ``kind`` tensors ("input"/"output") that set ``field`` (an empty
    string, as a server-completed configuration carries, sets nothing)."""
    return {t.get("name", ""): t[field] for t in config.get(kind, []) if field in t and t[field] != ""}


def _outcome(answer) -> str:
    return "answered" if answer.ok else f"refused ({answer.error[:160]})"


def _judge_tensors(without: list[tuple[str, str]], reference: str | None,
                   as_reshaped: list[tuple[str, list, list, str]],
                   answered_as: list[tuple[str, list, list]]) -> list[str]:
    """What the tensors check saw wrong, from its requests' outcomes ("answered" or "refused (why)"): ``without``:
    (the optional inputs left out, the outcome); ``reference``: the request of the declared dims' outcome, None where
    no tensor declares a reshape (it then decides nothing); ``as_reshaped``: (input, its reshape, its dims, the
    outcome of a request shaped as the reshape); ``answered_as``: (output, the shape it came back in, its dims)."""
    problems = []
    for left_out, outcome in without:
        if outcome != "answered":
            problems.append(f"a request without the optional input {left_out} was {outcome}")
    if reference is not None and reference != "answered":
        problems.append(f"a request of the declared dims was {reference}")
    for name, shape, dims, outcome in as_reshaped:
        if outcome == "answered":
            problems.append(f"input {name}: a request shaped as its reshape {shape} (not its dims {dims}) was "
                            f"answered")
    for name, shape, dims in answered_as:
        if not fits_dims(shape, dims, True):  # the codec gives every answer a batch dim
            problems.append(f"output {name} answered as {shape}, declared dims {dims} (its reshape not undone)")
    return problems


def check_tensors(target: Target) -> CheckResult:
    d = target.description
    optional = [name for name, on in _declared(d.config, "input", "optional").items() if on]
    reshaped = {name: [int(x) for x in (r or {}).get("shape", [])]
                for name, r in _declared(d.config, "input", "reshape").items()}
    out_reshaped = list(_declared(d.config, "output", "reshape"))
    if not (optional or reshaped or out_reshaped):
        return CheckResult(target.name, "tensors", "no optional input, no reshape", "-", "skipped",
                           "no input is optional and no tensor declares a reshape (a missing required input is "
                           "the refusals check's)")
    request = target.request(1)
    evidence, without, as_reshaped, answered_as = {}, [], [], []
    for left_out in [[n] for n in optional] + ([optional] if len(optional) > 1 else []):
        answer = ask(target, {k: v for k, v in request.items() if k not in left_out})
        evidence[f"without {', '.join(left_out)}"] = _outcome(answer)
        without.append((", ".join(left_out), _outcome(answer)))
    reference = ask(target, request)
    evidence["declared dims"] = _outcome(reference)
    for name, shape in reshaped.items():
        dims = d.input(name).shape
        if list(dims) == shape or any(x < 0 for x in dims):
            evidence[f"{name} as reshaped {shape}"] = "not sent: the reshape accepts the declared dims' shape too"
            continue
        batch = (1,) if d.batching else ()
        other = np.resize(request[name], batch + tuple(max(x, 1) for x in shape))
        answer = ask(target, {**request, name: other})
        evidence[f"{name} as reshaped {shape}"] = _outcome(answer)
        as_reshaped.append((name, shape, list(dims), _outcome(answer)))
    if out_reshaped and reference.ok:
        for outputs in responses(reference):
            for t in d.outputs:
                if t.name in out_reshaped and t.name in outputs:
                    shape = list(outputs[t.name].shape)
                    evidence[f"{t.name} answered as"] = shape
                    answered_as.append((t.name, shape, list(t.shape)))
    problems = _judge_tensors(without, _outcome(reference) if reshaped or out_reshaped else None, as_reshaped,
                              answered_as)
    declared = "; ".join(filter(None, (f"optional {', '.join(optional)}" if optional else "",
                                       f"input reshape {reshaped}" if reshaped else "",
                                       f"output reshape {', '.join(out_reshaped)}" if out_reshaped else "")))
    return CheckResult(target.name, "tensors", declared, "; ".join(f"{k}: {v}" for k, v in evidence.items()),
                       "fail" if problems else "pass", "; ".join(problems), evidence)


def _judge_classes(name: str, filename: str, count: int, outcome: str, got: list[str], labels: list[str] | None,
                   values: np.ndarray) -> list[str]:
    """What is wrong with output ``name``'s top ``count`` classes: ``outcome``: the classification request's
    ("answered" or "refused (why)"), ``got``: its ``score:index:label`` strings, ``labels``: the lines of
    ``filename`` (None where there is no such file), ``values``: the output's values as a tensor, flat."""
    problems = []
    if outcome != "answered":
        problems.append(f"output {name} asked for its top {count} classes was {outcome}")
        return problems
    for text in got:
        parts = text.split(":", 2)
        if len(parts) < 3 or not parts[1].isdigit():
            problems.append(f"output {name}: class {text!r} carries no label (score:index:label expected, "
                            f"label_filename {filename})")
            break
        index = int(parts[1])
        if labels is not None and (index >= len(labels) or parts[2] != labels[index]):
            problems.append(f"output {name}: class {text!r}: line {index} of {filename} is "
                            f"{labels[index] if index < len(labels) else 'missing'!r}")
            break
        if not np.isclose(float(parts[0]), values[index], rtol=1e-4, atol=1e-5):
            problems.append(f"output {name}: class {text!r}: the output's value at {index} is {values[index]:g}")
            break
    top = sorted(np.argsort(-values, kind="stable")[:count].tolist())
    indices = sorted(int(t.split(":")[1]) for t in got if t.count(":") >= 1 and t.split(":")[1].isdigit())
    # the classes' values must be the top values: where two tie for the last place, either index is a top class
    chosen = np.sort([values[i] if i < values.size else -np.inf for i in indices])[::-1]
    if len(indices) == count and not np.array_equal(chosen, np.sort(values)[::-1][:count], equal_nan=True):
        problems.append(f"output {name}: classes {indices} answered, its top {count} are {top}")
    return problems


def check_classification(target: Target) -> CheckResult:
    d = target.description
    labelled = _declared(d.config, "output", "label_filename")
    if not labelled:
        return CheckResult(target.name, "classification", "no label_filename", "-", "skipped",
                           "no output declares label_filename")
    request = target.request(1)
    plain = ask(target, request)
    if not plain.ok:
        return CheckResult(target.name, "classification", f"label_filename on {', '.join(labelled)}", "-", "fail",
                           f"the reference request was {_outcome(plain)}")
    problems, evidence = [], {}
    raw = responses(plain)[0]
    for name, filename in labelled.items():
        if d.output(name).dtype == "bytes":
            evidence[name] = {"label_file": filename, "answered": [], "not_served": NEVER_ASKED}
            continue
        path = target.directory / filename
        labels = path.read_text().splitlines() if path.is_file() else None
        values = np.asarray(raw[name], dtype=np.float64).reshape(-1)
        count = min(CLASSES, values.size)
        answer = ask(target, request, options=RequestOptions(classes=((name, count),)))
        if not answer.ok and UNSUPPORTED in answer.error:  # the extension's limit, not the deployment's fault
            evidence[name] = {"label_file": filename, "answered": [], "not_served": answer.error[:200]}
            continue
        if not answer.ok:
            problems += _judge_classes(name, filename, count, _outcome(answer), [], labels, values)
            continue
        got = [bytes(x).decode() for x in np.asarray(responses(answer)[0][name]).reshape(-1)]
        evidence[name] = {"label_file": filename, "labels_in_file": None if labels is None else len(labels),
                          "answered": got}
        problems += _judge_classes(name, filename, count, _outcome(answer), got, labels, values)
    observed = "; ".join(f"{k}: {', '.join(v['answered']) or v.get('not_served', '')}" for k, v in evidence.items())
    if not problems and all(v.get("not_served") for v in evidence.values()):
        why = next(iter(evidence.values()))["not_served"]
        return CheckResult(target.name, "classification", f"label_filename on {', '.join(labelled)}", observed,
                           "skipped", why if why == NEVER_ASKED else f"Triton's classification extension does not "
                           f"serve these outputs' type: {why[:160]}", evidence)
    return CheckResult(target.name, "classification", f"label_filename on {', '.join(labelled)}", observed,
                       "fail" if problems else "pass", "; ".join(problems), evidence)
