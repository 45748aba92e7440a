"""Tensor comparison: outputs against their reference with per-output atol/rtol (strings exactly, a valid
length masking padding), and batched runs whose outputs are padded to one shape. Export verification, the
accuracy scenario, accuracy under load and the module diagnosis all compare through here."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from tritonsuite.core.spec import ModelSpec
from tritonsuite.core.reasons import reason

#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("text",)


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{}: max abs error {}, max rel error {} (atol {}, rtol {}",
           "unit/test_accuracy_compare.py::test_without_a_share_every_element_must_match",
           "test_user_repository.py::test_a_wrong_served_model_fails_accuracy_against_its_in_process_reference"),
    reason(", at most {} of a sample's elements outside)",
           "unit/test_accuracy_compare.py::test_a_share_is_judged_per_sample_and_names_the_worst_sample"),
    reason("; {}/{} elements out of tolerance, at most {} of sample {}'s",
           "unit/test_accuracy_compare.py::test_a_share_is_judged_per_sample_and_names_the_worst_sample"),
    reason("; {}/{} elements out of tolerance, worst at sample {} index {}",
           "unit/test_accuracy_compare.py::test_without_a_share_every_element_must_match",
           "test_user_repository.py::test_a_validation_data_mismatch_fails_naming_the_output"),
    reason("; {} NaN and {} inf of {} served elements the reference does not have",
           "unit/test_accuracy_compare.py::test_served_nan_and_inf_fail_naming_the_tensor_and_their_counts",
           "test_user_repository_edges.py::"
           "test_a_batchless_model_runs_every_scenario_and_a_nan_answer_fails_accuracy_naming_it"),
)


@dataclass(frozen=True)
class OutputComparison:
    """How one output tensor compares with its reference."""

    name: str
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    mismatched: int  # elements outside atol + rtol * |reference|
    total: int
    worst_index: tuple[int, ...] = ()  # index of the largest violation; worst_index[0] is the sample
    allowed_share: float = 0.0  # fraction of a sample's elements allowed out of tolerance (discrete outputs)
    worst_sample: int = 0  # the sample with the largest share of elements out of tolerance
    worst_sample_share: float = 0.0
    nan: int = 0  # served elements that are NaN where the reference is not
    inf: int = 0  # served elements that are +-inf where the reference is not that same infinity

    @property
    def passed(self) -> bool:
        return self.mismatched == 0 or (self.worst_sample_share <= self.allowed_share and not self.nan + self.inf)

    def describe(self) -> str:
        text = (f"{self.name}: max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g} "
                f"(atol {self.atol:g}, rtol {self.rtol:g}")
        text += f", at most {self.allowed_share:g} of a sample's elements outside)" if self.allowed_share else ")"
        if self.mismatched and self.allowed_share:
            text += (f"; {self.mismatched}/{self.total} elements out of tolerance, at most "
                     f"{self.worst_sample_share:.3g} of sample {self.worst_sample}'s")
        elif self.mismatched:
            text += f"; {self.mismatched}/{self.total} elements out of tolerance, worst at sample {self.worst_index[0]}" \
                    f" index {self.worst_index[1:]}"
        if self.nan + self.inf:
            text += f"; {self.nan} NaN and {self.inf} inf of {self.total} served elements the reference does not have"
        return text


def compare_outputs(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], spec: ModelSpec,
                    precision: str) -> list[OutputComparison]:
    results = []
    for out in spec.outputs:
        if out.name not in actual:
            raise KeyError(f"output {out.name!r} missing; got {sorted(actual)}")
        a, e = _comparable(actual[out.name], expected[out.name])
        valid = None
        if out.valid_length is not None:  # compare the reference's valid frames only (padding is not output)
            a, e, valid = _valid_region(a, e, expected[out.valid_length[0]], out.valid_length[1] + 1)
        if a.shape != e.shape:
            raise ValueError(f"output {out.name!r} has shape {a.shape}, reference has {e.shape}")
        atol, rtol = spec.tolerance(precision, out.name)
        with np.errstate(invalid="ignore", over="ignore"):  # infinities and NaN are judged apart, below
            same = (a == e) | (np.isnan(a) & np.isnan(e))
            diff = np.where(same, 0.0, np.abs(a - e))
            violation = diff - (atol + rtol * np.abs(e))
            rel = diff / np.maximum(np.abs(e), 1e-12)
        nan_mismatch = np.isnan(a) != np.isnan(e)
        # an infinity on either side that the other does not match: no tolerance covers it (inf - inf is NaN)
        inf_mismatch = (np.isinf(a) | np.isinf(e)) & (a != e) & ~nan_mismatch
        served_nan, served_inf = np.isnan(a) & ~np.isnan(e), np.isinf(a) & (a != e)
        if valid is not None:
            diff, rel = np.where(valid, diff, 0.0), np.where(valid, rel, 0.0)
            violation, nan_mismatch = np.where(valid, violation, -np.inf), nan_mismatch & valid
            inf_mismatch, served_nan, served_inf = inf_mismatch & valid, served_nan & valid, served_inf & valid
        special = nan_mismatch | inf_mismatch
        bad = (violation > 0) | special
        ranked = np.where(special, np.inf, np.nan_to_num(violation, nan=-np.inf, posinf=np.inf, neginf=-np.inf))
        worst = np.unravel_index(int(np.argmax(ranked)), a.shape) if a.size else ()
        per_sample = np.zeros(1)  # share of each sample's (valid) elements out of tolerance
        if a.size:
            counted = valid.reshape(len(valid), -1).sum(axis=1) if valid is not None else bad[0].size
            per_sample = bad.reshape(len(bad), -1).sum(axis=1) / np.maximum(counted, 1)
        results.append(OutputComparison(
            name=out.name, max_abs_error=_largest(diff), max_rel_error=_largest(rel), atol=atol, rtol=rtol,
            mismatched=int(bad.sum()), total=int(a.size if valid is None else valid.sum()),
            worst_index=tuple(int(i) for i in worst), allowed_share=spec.mismatch_share(precision, out.name),
            worst_sample=int(np.argmax(per_sample)), worst_sample_share=float(per_sample.max()),
            nan=int(served_nan.sum()), inf=int(served_inf.sum())))
    return results


def _largest(x: np.ndarray) -> float:
    """The largest element that is a number (NaN where none is: every element a NaN the other side lacks)."""
    numbers = x[~np.isnan(x)]
    return float(numbers.max()) if numbers.size else (0.0 if not x.size else float("nan"))


def _comparable(actual, expected) -> tuple[np.ndarray, np.ndarray]:
    """Both as float64 arrays to compare with a tolerance. Strings (BYTES, compared as UTF-8 bytes) compare exactly:
    each element becomes its distance, 0.0 where equal and 1.0 where not, against 0.0; BOOL, the integer widths,
    FP16 and BF16 compare as numbers."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.dtype != object and e.dtype != object and a.dtype.kind not in "SU" and e.dtype.kind not in "SU":
        return a.astype(np.float64), e.astype(np.float64)

    def encoded(x: np.ndarray) -> np.ndarray:
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in x.reshape(-1)],
                        dtype=object).reshape(x.shape)

    a, e = encoded(a), encoded(e)
    if a.shape != e.shape:
        return np.zeros(a.shape), np.zeros(e.shape)  # the caller names the shapes
    return (a != e).astype(np.float64), np.zeros(e.shape)


def _valid_region(actual: np.ndarray, expected: np.ndarray, lengths: np.ndarray, axis: int):
    """Crop both arrays to a common size along ``axis`` and mask the elements past each sample's valid length."""
    n = min(actual.shape[axis], expected.shape[axis])
    actual, expected = np.take(actual, np.arange(n), axis=axis), np.take(expected, np.arange(n), axis=axis)
    per_sample = np.asarray(lengths).reshape(len(expected), -1)[:, 0]
    frames = np.arange(n).reshape([n if i == axis else 1 for i in range(expected.ndim)])
    valid = frames < per_sample.reshape([-1] + [1] * (expected.ndim - 1))
    return actual, expected, np.broadcast_to(valid, expected.shape)


def run_batched(infer: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]], inputs: Mapping[str, np.ndarray],
                batch_size: int) -> dict[str, np.ndarray]:
    """Run ``infer`` over all samples in batches of ``batch_size`` and concatenate the outputs.

    Outputs whose dynamic dims differ between batches (a padded length) are zero-padded to the longest first.
    """
    n = len(next(iter(inputs.values())))
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, n, batch_size):
        out = infer({k: v[start:start + batch_size] for k, v in inputs.items()})
        for k, v in out.items():
            parts.setdefault(k, []).append(v)
    return {k: np.concatenate(pad_to_common_shape(v)) for k, v in parts.items()}


def pad_to_common_shape(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Zero-pad arrays (at the end of every axis but the first) to their largest common shape."""
    target = np.max([a.shape[1:] for a in arrays], axis=0) if arrays and arrays[0].ndim > 1 else None
    if target is None:
        return arrays
    return [a if a.shape[1:] == tuple(target) else
            np.pad(a, [(0, 0)] + [(0, int(t) - d) for t, d in zip(target, a.shape[1:])]) for a in arrays]


#: a floating output's (atol, rtol) by its name and dtype (the side that is floating)
Tolerance = Callable[[str, np.dtype], tuple[float, float]]


def answer_difference(got: Sequence, want: Sequence, item: str = "response",
                      tolerance: Tolerance = lambda name, dtype: (0.0, 0.0), padded: Mapping[str, int] = {},
                      against: str = "") -> tuple[float, str]:
    """The one comparison of two answers (each a list of ``item``'s outputs: a decoupled model's responses, a
    sequence's steps, else the one response): the largest |difference| and what is beyond tolerance ("" when none).
    A count, a missing output, a shape or a string that differs is infinitely far; integers are compared exactly
    (their difference told); floating outputs (either side) within ``tolerance(name, dtype)``, NaN equal to NaN. An
    output padded within a batch (``padded``: its axis) is compared over the extent ``want`` has: past it, an answer
    under load holds its batch-mates' padding. Outputs ``got`` has beyond ``want``'s are not compared. ``against``
    follows the count of ``want`` in the reason (" alone")."""
    if len(got) != len(want):
        return math.inf, f"{len(got)} {item}s vs {len(want)}{against}"
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        for name, expected in w.items():
            if name not in g:
                return math.inf, f"{item} {i}: no output {name}"
            actual, axis = g[name], padded.get(name)
            if axis is not None and np.ndim(actual) == np.ndim(expected) > axis:
                actual = np.take(actual, range(min(np.shape(actual)[axis], np.shape(expected)[axis])), axis=axis)
            if np.shape(actual) != np.shape(expected):
                return math.inf, f"{item} {i} output {name}: shape {np.shape(actual)} vs {np.shape(expected)}"
            a, e = np.asarray(actual), np.asarray(expected)
            if a.dtype.kind not in "fiub" or e.dtype.kind not in "fiub":  # strings: exactly
                if not np.array_equal(a, e):
                    return math.inf, f"{item} {i} output {name}: {int(np.sum(a != e))} elements differ"
                continue
            if a.dtype.kind != "f" and e.dtype.kind != "f":  # integers: exactly, the difference told
                worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e), initial=0.0)))
                if not np.array_equal(a, e):
                    return worst, f"{item} {i} output {name}: {int(np.sum(a != e))} of {a.size} elements differ"
                continue
            atol, rtol = tolerance(name, e.dtype if e.dtype.kind == "f" else a.dtype)
            a, e = a.astype(np.float64), e.astype(np.float64)
            diff = np.where((a == e) | (np.isnan(a) & np.isnan(e)), 0.0, np.abs(a - e))
            worst = max(worst, float(np.nan_to_num(diff, nan=math.inf, posinf=math.inf).max(initial=0.0)))
            bad = ~np.isclose(a, e, atol=atol, rtol=rtol, equal_nan=True)
            if bad.any():
                return worst, (f"{item} {i} output {name}: {int(bad.sum())} of {bad.size} elements beyond atol "
                               f"{atol:g} + rtol {rtol:g}, max |diff| {float(np.max(diff[bad])):.3g}")
    return worst, ""
