"""The tensors and classification checks' judging (tritonsuite.judge.conformance.tensors ``_judge_tensors``,
``_judge_classes``) on observations built to cause each reason: the outcomes of the requests the check sends and
the classes a server answers. A sound case passes, each fault gives its one reason, and each boundary (a reshape
undone or not, a tie at the last top class) is judged on both sides."""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.tensors import _judge_classes, _judge_tensors

REFUSED = "refused (unexpected shape for input 'INPUT0')"


def test_tensors_passes_a_deployment_that_answers_as_its_fields_declare():
    assert _judge_tensors([("INPUT1", "answered"), ("INPUT1, INPUT2", "answered")], "answered",
                          [("INPUT0", [4, 4], [16], REFUSED)], [("OUTPUT0", [1, 16], [16])]) == []


def test_tensors_fails_a_request_without_an_optional_input_refused():
    problems = _judge_tensors([("INPUT1", "answered"), ("INPUT1, INPUT2", REFUSED)], None, [], [])
    assert problems == [f"a request without the optional input INPUT1, INPUT2 was {REFUSED}"]
    assert ("fail" if problems else "pass") == "fail"


def test_tensors_fails_a_refused_request_of_the_declared_dims_only_where_a_reshape_is_declared():
    assert _judge_tensors([], REFUSED, [], []) == [f"a request of the declared dims was {REFUSED}"]
    assert _judge_tensors([], None, [], []) == []  # no reshape: the reference request decides nothing here


def test_tensors_fails_an_input_answered_as_its_reshape():
    problems = _judge_tensors([], "answered", [("INPUT0", [4, 4], [16], "answered")], [])
    assert problems == ["input INPUT0: a request shaped as its reshape [4, 4] (not its dims [16]) was answered"]


def test_tensors_fails_an_output_answered_in_the_models_own_dims():
    problems = _judge_tensors([], "answered", [], [("OUTPUT0", [1, 4, 4], [16])])
    assert problems == ["output OUTPUT0 answered as [1, 4, 4], declared dims [16] (its reshape not undone)"]
    # the batch dim the codec gives every answer is no fault, any size of it; one more or less dim is
    assert _judge_tensors([], "answered", [], [("OUTPUT0", [3, 16], [16])]) == []
    assert _judge_tensors([], "answered", [], [("OUTPUT0", [16], [16])]) == [
        "output OUTPUT0 answered as [16], declared dims [16] (its reshape not undone)"]


def test_tensors_names_every_fault_in_the_order_it_checks_them():
    problems = _judge_tensors([("INPUT1", REFUSED)], REFUSED, [("INPUT0", [4, 4], [16], "answered")],
                              [("OUTPUT0", [1, 4, 4], [16])])
    assert [p.split(" ")[0:2] for p in problems] == [["a", "request"], ["a", "request"], ["input", "INPUT0:"],
                                                      ["output", "OUTPUT0"]]


LABELS = [f"class_{i}" for i in range(6)]
VALUES = np.array([0.1, 0.9, 0.3, 0.7, 0.5, 0.0])  # top 3: 1, 3, 4


def classes(*indices, values=VALUES, labels=LABELS):
    return [f"{values[i]:g}:{i}:{labels[i]}" for i in indices]


def judge(got, outcome="answered", labels=LABELS, values=VALUES, count=3):
    return _judge_classes("OUTPUT0", "labels.txt", count, outcome, got, labels, values)


def test_classification_passes_the_top_classes_with_the_files_labels_and_the_outputs_values():
    assert judge(classes(1, 3, 4)) == []
    assert judge(classes(1, 3, 4), labels=None) == []  # no label file on this host: the labels are not compared


def test_classification_fails_a_refused_request_for_classes():
    problems = judge([], outcome="refused (output 'OUTPUT0' is not a classification output)")
    assert problems == ["output OUTPUT0 asked for its top 3 classes was refused (output 'OUTPUT0' is not a "
                        "classification output)"]


def test_classification_fails_a_class_that_carries_no_label():
    assert judge(["0.9:1"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.9:1' carries no label (score:index:label expected, label_filename labels.txt)"]
    assert judge(["0.9:one:class_1"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.9:one:class_1' carries no label (score:index:label expected, label_filename "
        "labels.txt)"]


def test_classification_fails_a_label_that_is_not_the_files_line_at_its_index():
    assert judge(["0.9:1:class_2"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.9:1:class_2': line 1 of labels.txt is 'class_1'"]
    short = LABELS[:2]  # the server answers an index the file has no line for
    assert judge(classes(1) + ["0.7:3:class_3"] + classes(4), labels=short) == [
        "output OUTPUT0: class '0.7:3:class_3': line 3 of labels.txt is 'missing'"]


def test_classification_fails_a_score_that_is_not_the_outputs_value():
    assert judge(["0.8:1:class_1"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.8:1:class_1': the output's value at 1 is 0.9"]
    assert judge(["0.90001:1:class_1"] + classes(3, 4)) == []  # within rtol 1e-4


def test_classification_fails_classes_that_are_not_the_top_ones():
    assert judge(classes(1, 3, 2)) == ["output OUTPUT0: classes [1, 2, 3] answered, its top 3 are [1, 3, 4]"]


def test_classification_takes_either_class_of_a_tie_at_the_last_top_place():
    tied = np.array([0.1, 0.9, 0.5, 0.7, 0.5, 0.0])  # 2 and 4 tie for the third place
    assert judge(classes(1, 3, 2, values=tied), values=tied) == []
    assert judge(classes(1, 3, 4, values=tied), values=tied) == []
    # a tie decides only between the tied classes: one below them is still not a top class
    assert judge(classes(1, 3, 0, values=tied), values=tied) == [
        "output OUTPUT0: classes [0, 1, 3] answered, its top 3 are [1, 2, 3]"]
    assert judge(classes(1, 2, 4, values=tied), values=tied) == [  # both tied, the second place left out
        "output OUTPUT0: classes [1, 2, 4] answered, its top 3 are [1, 2, 3]"]


def test_classification_of_an_output_with_as_many_elements_as_classes_wants_each_once():
    few = np.array([0.2, 0.9, 0.5])
    assert judge(classes(0, 1, 2, values=few), values=few) == []
    assert judge(classes(0, 1, 1, values=few), values=few) == [  # one class twice, one left out
        "output OUTPUT0: classes [0, 1, 1] answered, its top 3 are [0, 1, 2]"]


def test_classification_splits_a_class_in_three_parts_only_a_label_may_hold_colons():
    labels = ["a:b", "c", "d"]
    values = np.array([0.9, 0.5, 0.1])
    assert judge(["0.9:0:a:b", "0.5:1:c"], labels=labels, values=values, count=2) == []
    assert judge(["0.9:0:a", "0.5:1:c"], labels=labels, values=values, count=2) == [
        "output OUTPUT0: class '0.9:0:a': line 0 of labels.txt is 'a:b'"]


def test_classification_fails_an_index_one_past_the_files_last_line():
    assert judge(classes(1, 3, 4), labels=LABELS[:4]) == [
        "output OUTPUT0: class '0.5:4:class_4': line 4 of labels.txt is 'missing'"]
    assert judge(classes(1, 3, 4), labels=LABELS[:5]) == []


def test_classification_compares_a_score_within_atol_near_zero():
    values = np.array([0.0, 0.9, 0.7])
    assert judge(["0.9:1:class_1", "0.7:2:class_2", "0.000009:0:class_0"], values=values) == []
    assert judge(["0.9:1:class_1", "0.7:2:class_2", "0.000011:0:class_0"], values=values) == [
        "output OUTPUT0: class '0.000011:0:class_0': the output's value at 0 is 0"]


def test_classification_judges_the_top_classes_even_after_a_class_without_a_label():
    assert judge(["0.1:0"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.1:0' carries no label (score:index:label expected, label_filename labels.txt)",
        "output OUTPUT0: classes [0, 3, 4] answered, its top 3 are [1, 3, 4]"]
    assert judge(["0.9"] + classes(3, 4)) == [  # no index at all: two classes answered, not three
        "output OUTPUT0: class '0.9' carries no label (score:index:label expected, label_filename labels.txt)"]


def test_classification_of_fewer_classes_than_asked_judges_their_labels_and_scores_only():
    assert judge(classes(1, 3)) == [] and judge(classes(0, 2)) == []


def test_classification_takes_a_nan_top_value_as_equal_to_itself():
    values = np.array([np.nan, 0.9, 0.3])
    assert judge(["nan:0:class_0", "0.9:1:class_1"], values=values, count=2) == [
        "output OUTPUT0: class 'nan:0:class_0': the output's value at 0 is nan"]


def test_the_fields_declared_are_the_tensors_that_set_them_to_something():
    from tritonsuite.judge.conformance.tensors import _declared, _outcome
    from tritonsuite.load.exchange import Answer

    config = {"input": [{"name": "A", "optional": True}, {"name": "B", "optional": False}, {"name": "C"},
                        {"name": "D", "reshape": ""}, {"reshape": {"shape": [4]}}],
              "output": [{"name": "O", "label_filename": "labels.txt"}]}
    assert _declared(config, "input", "optional") == {"A": True, "B": False}
    assert _declared(config, "input", "reshape") == {"": {"shape": [4]}}
    assert _declared(config, "output", "label_filename") == {"O": "labels.txt"}
    assert _declared(config, "output", "reshape") == {} and _declared({}, "input", "optional") == {}
    assert _outcome(Answer(0.0, 0.1, True)) == "answered"
    assert _outcome(Answer(0.0, 0.1, False, error="e" * 200)) == f"refused ({'e' * 160})"


def test_classification_compares_a_score_within_rtol_of_the_outputs_value():
    assert judge(["0.90008:1:class_1"] + classes(3, 4)) == []  # 8e-5 apart: within 1e-5 + 1e-4 x 0.9
    assert judge(["0.9002:1:class_1"] + classes(3, 4)) == [
        "output OUTPUT0: class '0.9002:1:class_1': the output's value at 1 is 0.9"]


def test_classification_names_the_top_classes_of_tied_values_in_index_order():
    values = np.round(np.random.default_rng(0).random(20), 1)  # many ties: the first of equal values is the top one
    labels = [f"class_{i}" for i in range(20)]
    lowest = np.argsort(values, kind="stable")[:5].tolist()
    problems = judge(classes(*lowest, values=values, labels=labels), labels=labels, values=values, count=5)
    assert problems == [f"output OUTPUT0: classes {sorted(lowest)} answered, its top 5 are [4, 5, 9, 12, 16]"]


def test_classification_takes_an_index_beyond_the_output_as_no_top_value():
    values = np.array([0.1, 0.9, 0.3, 0.7, 0.5, np.inf])  # top 3: 5 (inf), 1, 3
    labels = LABELS + ["class_6"] * 5
    # the first class carries no label (the rest are not read further); index 10 is past the output's 6 values
    assert judge(["0.9:1", "0.7:3:class_3", "1:10:class_6"], labels=labels, values=values) == [
        "output OUTPUT0: class '0.9:1' carries no label (score:index:label expected, label_filename labels.txt)",
        "output OUTPUT0: classes [1, 3, 10] answered, its top 3 are [1, 3, 5]"]
    assert judge(["0.9:1", "0.7:3:class_3", "1:6:class_6"], labels=labels, values=values)[1:] == [
        "output OUTPUT0: classes [1, 3, 6] answered, its top 3 are [1, 3, 5]"]  # index 6: one past the last value
