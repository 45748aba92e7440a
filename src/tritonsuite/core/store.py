"""The run store: where rows, fault records and manifests are kept and the one reader of them.

Rows are appended to ``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` the moment they exist (one
``os.write`` per line on an ``O_APPEND`` descriptor, then ``fsync``), so a crash keeps what was measured and
parallel workers, each with its own file, never interfere. Fault records (what :mod:`tritonsuite.run.isolation`
gave up or restarted) sit beside them under ``raw/faults/``, and each run's provenance manifest as
``raw/manifest-<run_id>.json``. Every presenter, the comparison of runs and the session reports read through
here, and a line that does not read is treated one way everywhere: skipped with a warning naming the file and line
(a crash mid-write leaves at most a truncated last line), and a reference that then holds nothing is an error that
says what was skipped.
"""
from __future__ import annotations

import json
import math
import os
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from tritonsuite.core.access import redact
from tritonsuite.core.rows import Row, _finite, _json_default

PERFORMANCE_SCENARIOS = ("offline", "online")


class StoreError(ValueError):
    """A stored run that cannot be found or holds nothing of what was asked; one line naming it."""


#: What two runs' manifests are compared on (dotted paths), in the order a comparison names differences.
COMPARED = ("suite.git_revision", "suite.dirty", "server", "backends", "profile.sha256", "versions.torch",
            "versions.onnxruntime", "versions.onnxruntime-gpu", "versions.tritonclient", "versions.tensorrt",
            "host.cpu", "host.cores", "host.gpus", "host.cuda")


class RawWriter:
    """Append-only JSON-lines writer; each :meth:`append` is durable when it returns.

    Every record is serialised to one line and written with a single ``os.write`` on a descriptor opened with
    ``O_APPEND`` (then fsync'd), so a crash loses at most the line being written and appends never overwrite
    each other.  If the file ends with a partial line (a previous process died mid-write), a newline is written
    first so the fragment stays on its own (skipped) line instead of corrupting the next record.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"RawWriter({str(self.path)!r})"

    def append(self, row: Row | Mapping[str, Any]) -> None:
        """Append a row (stamped with the time it is written, if it has none)."""
        record = row.to_dict() if isinstance(row, Row) else dict(row)
        record["timestamp"] = record.get("timestamp") or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        line = redact(json.dumps(_finite(record), default=_json_default, allow_nan=False, ensure_ascii=False))
        data = (line + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if _ends_with_partial_line(fd):
                data = b"\n" + data
            written = os.write(fd, data)
            while written < len(data):  # regular files do not short-write in practice; be safe anyway
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


def _ends_with_partial_line(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def safe_component(value: Any) -> str:
    text = str(value)
    for sep in {os.sep, "/", os.altsep or "/"}:
        text = text.replace(sep, "_")
    return text


def raw_path(reports_dir: str | os.PathLike[str], scenario: str, run_id: str, worker: str = "main") -> Path:
    """``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` (one file per scenario, run and worker)."""
    name = f"{safe_component(scenario)}-{safe_component(run_id)}-{safe_component(worker)}.jsonl"
    return Path(reports_dir) / "raw" / name


def _timestamp_key(row: Row) -> float:
    ts = row.timestamp
    if isinstance(ts, str):
        try:
            dt = datetime.fromisoformat(ts)
        except ValueError:
            return math.inf
        if dt.tzinfo is None:  # naive timestamps: treat as UTC rather than local time
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    return math.inf


def read_records(path: Path, problems: list[str] | None = None) -> list[dict]:
    """The JSON objects of one JSON-lines file, in file order. A line that does not read is skipped: named in
    ``problems`` when given, else in a warning. It is a truncated last line (a crash mid-write) or, rarely, a
    fragment a later writer continued in the middle."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").split("\n")
    last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            why = "" if isinstance(record, dict) else "not a JSON object"
        except json.JSONDecodeError as exc:
            why = f"{'truncated last line' if lineno - 1 == last_index else 'unparsable line'}: {exc.msg}"
        if why:
            _skipped(f"{path}:{lineno}: not a tritonsuite row ({why})", problems)
        else:
            records.append(record)
    return records


def _skipped(problem: str, problems: list[str] | None) -> None:
    if problems is None:
        warnings.warn(f"skipped {problem}", RuntimeWarning, stacklevel=4)
    else:
        problems.append(problem)


def read_rows(path: Path, run_id: str | None = None, problems: list[str] | None = None) -> list[Row]:
    """The rows of one raw file (of run ``run_id`` when given); what does not read is skipped (``read_records``)."""
    rows = []
    for record in read_records(path, problems):
        if run_id is not None and record.get("run_id") != run_id:
            continue
        try:
            rows.append(Row.from_dict(record))
        except (TypeError, ValueError) as exc:
            _skipped(f"{path}: a record is not a tritonsuite row ({exc})", problems)
    return rows


def load_rows(reports_dir: str | os.PathLike[str], run_id: str | None = None) -> list[Row]:
    """Every ``<reports_dir>/raw/*.jsonl`` row (filtered by ``run_id`` when given), oldest first: ordered by their
    ``timestamp`` (stable; rows without one keep file order at the end)."""
    raw_dir = Path(reports_dir) / "raw"
    rows: list[Row] = []
    for path in sorted(raw_dir.glob("*.jsonl")) if raw_dir.is_dir() else ():
        rows += read_rows(path, run_id)
    rows.sort(key=_timestamp_key)
    return rows


def faults_path(reports_dir: str | Path, run_id: str, worker: str) -> Path:
    """``<reports_dir>/raw/faults/<run_id>-<worker>.jsonl``: what :mod:`tritonsuite.run.isolation` records (the
    deployments given up, the server's restarts), one JSON object a line; beside the rows, not among them."""
    return Path(reports_dir) / "raw" / "faults" / f"{safe_component(run_id)}-{safe_component(worker)}.jsonl"


def read_faults(reports_dir: str | Path, run_id: str) -> list[dict]:
    """Every fault record of run ``run_id`` (every worker's), in the order written."""
    return [record for path in sorted(Path(reports_dir, "raw", "faults").glob(f"{safe_component(run_id)}-*.jsonl"))
            for record in read_records(path)]


def fault_lines(records: list[dict]) -> list[str]:
    """One line per deployment given up and per restart ("given up: ...", "restarted: ..."), as the terminal
    summary and summary.md say it."""
    return [f"{'given up' if r['kind'] == 'given_up' else 'restarted'}: {r['line']}" for r in records]


def manifest_path(reports_dir: str | os.PathLike[str], run_id: str) -> Path:
    return Path(reports_dir) / "raw" / f"manifest-{run_id}.json"


def write_manifest(reports_dir: str | os.PathLike[str], manifest: dict[str, Any], latest: bool = True) -> list[Path]:
    """Keep a run's manifest as ``raw/manifest-<run_id>.json`` and, when it is the ``latest`` run written there,
    as ``manifest.json``."""
    text = json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n"
    paths = [manifest_path(reports_dir, manifest["run_id"])] + ([Path(reports_dir) / "manifest.json"] if latest else [])
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(redact(text), encoding="utf-8")
    return paths


def read_manifest(reports_dir: str | os.PathLike[str], run_id: str) -> dict[str, Any] | None:
    return _manifest_at(manifest_path(reports_dir, run_id))


def read_manifests(reports_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Every run's manifest kept under ``<reports_dir>/raw/``, by run id (one that does not read is left out)."""
    found = {}
    for path in sorted(Path(reports_dir, "raw").glob("manifest-*.json")):
        manifest = _manifest_at(path)
        if isinstance(manifest, dict) and manifest.get("run_id"):
            found[str(manifest["run_id"])] = manifest
    return found


def latest_manifest(reports_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``<reports_dir>/manifest.json``: the manifest of the latest run written there."""
    return _manifest_at(Path(reports_dir) / "manifest.json")


def _manifest_at(path: Path) -> dict[str, Any] | None:
    """A manifest file's content; None where there is none or it does not read (a run stopped before writing it)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def differences(then: dict[str, Any] | None, now: dict[str, Any] | None) -> list[str]:
    """What differs between two runs' manifests, one line each ("versions.torch: 2.12.0 -> 2.13.0")."""
    if not then or not now:
        return []
    lines = []
    for path in COMPARED:
        a, b = _get(then, path), _get(now, path)
        if a != b:
            lines.append(f"{path}: {a} -> {b}")
    return lines


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


# ------------------------------------------------------------------------------------------------ loading runs
def load_run(reference: str | Path, reports_dir: str | Path = "reports") -> tuple[list[Row], str, dict | None]:
    """The performance rows of a stored run, a label for it, and its provenance manifest where one was kept.
    ``reference`` is a raw rows file (``.jsonl``, e.g. a copy kept as a baseline, with its
    ``manifest-<run_id>.json`` beside it), a reports or raw directory (its newest run), or a run id in
    ``reports_dir``."""
    path = Path(reference)
    manifest_dir = None
    if path.is_file():
        problems: list[str] = []
        rows = read_rows(path, problems=problems)
        if problems and not rows:
            raise StoreError(f"--compare {reference}: {problems[0]}")
        label = f"{path.name}"
        manifest_dir = path.parent.parent if path.parent.name == "raw" else None
    elif path.is_dir():
        base = path if (path / "raw").is_dir() else path.parent if path.name == "raw" else None
        rows = load_rows(base) if base is not None else []
        if not rows:
            raise StoreError(f"--compare {reference!r}: no raw rows in this directory (a reports directory holds "
                             f"them under raw/)")
        newest = max((r for r in rows if r.run_id), key=lambda r: r.run_id, default=None)
        rows = [r for r in rows if newest is None or r.run_id == newest.run_id]
        label = f"run {newest.run_id}" if newest else str(path)
        manifest_dir = base
    else:
        rows = load_rows(reports_dir, run_id=str(reference))
        if not rows:
            runs = sorted({r.run_id for r in load_rows(reports_dir) if r.run_id})
            raise StoreError(f"--compare {reference!r}: not a file, a directory or a run id in {reports_dir}/raw; "
                             f"valid run ids: {', '.join(runs[-5:]) or 'none'}")
        label = f"run {reference}"
        manifest_dir = Path(reports_dir)
    rows = [r for r in rows if r.scenario in PERFORMANCE_SCENARIOS]
    if not rows:
        raise StoreError(f"--compare {reference!r}: holds no offline or online rows")
    run_ids = {r.run_id for r in rows}
    manifest = None
    if len(run_ids) == 1:
        run_id = run_ids.pop()
        sibling = path.parent / f"manifest-{run_id}.json" if path.is_file() else None
        if sibling is not None and sibling.is_file():
            manifest = _manifest_at(sibling)
        elif manifest_dir is not None:
            manifest = read_manifest(manifest_dir, run_id)
    return rows, label, manifest
