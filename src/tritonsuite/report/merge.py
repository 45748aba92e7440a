"""Many hosts, one report: the raw rows and manifests of runs from several hosts (CI shards on separate runners)
merged into one reports directory whose tables and plots carry a Host column.

Each row is stamped with the host that measured it (``host``: the host name its run's manifest recorded, else the
row's ``Host`` parameter), so one deployment measured on two hosts is two series side by side, never one averaged
point; :func:`tritonsuite.judge.compare.point_key` joins points of the same host only, and a comparison names a host
difference (:func:`tritonsuite.judge.compare.compare_runs`). The inputs are read, never written.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from tritonsuite.core.store import RawWriter, load_rows, raw_path, read_manifests, write_manifest


class MergeError(ValueError):
    """Input that cannot be merged; the message names the directory and what was expected."""


def host_name(manifest: dict | None) -> str | None:
    """The host a run's manifest names: its host name, else (manifests before it was recorded) CPU, cores, GPUs."""
    host = (manifest or {}).get("host") or {}
    if host.get("name"):
        return str(host["name"])
    if host.get("cpu"):
        return f"{host.get('cpu')}, {host.get('cores')} cores, GPUs {host.get('gpus')}"
    return None


def merge_reports(sources, out: str | os.PathLike[str]) -> dict[str, int]:
    """Merge the rows and manifests of ``sources`` (reports directories) into ``out``/raw. Returns rows per host.

    ``out`` is rebuilt from the sources each time (its own raw rows are replaced); it must not be one of them."""
    out = Path(out)
    sources = [Path(s) for s in sources]
    for source in sources:
        if not (source / "raw").is_dir():
            raise MergeError(f"{source}: no raw rows (expected {source / 'raw'}/*.jsonl): give reports directories")
        if source.resolve() == out.resolve():
            raise MergeError(f"--out {out} is one of the inputs; merge into a new directory")
    shutil.rmtree(out / "raw", ignore_errors=True)
    (out / "raw").mkdir(parents=True)
    per_host: dict[str, int] = {}
    for index, source in enumerate(sources):
        manifests = read_manifests(source)
        for manifest in manifests.values():
            write_manifest(out, manifest, latest=False)
        writers: dict[tuple, RawWriter] = {}
        for row in load_rows(source):
            host = (host_name(manifests.get(row.run_id)) or row.extra.get("host")
                    or row.parameters.get("Host") or f"host of {source.name}")
            row.extra["host"] = str(host)
            key = (row.scenario, row.run_id)
            if key not in writers:
                writers[key] = RawWriter(raw_path(out, row.scenario, row.run_id or "unknown", f"merged{index}"))
            writers[key].append(row)
            per_host[str(host)] = per_host.get(str(host), 0) + 1
    return per_host
