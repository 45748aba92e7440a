"""Cached files that heal: a cache entry records the size and sha256 of what it holds, a reader checks them before
trusting it (a mismatch is one line of notice, then the entry is rebuilt), and what is handed out of the cache is a
private copy (a reflink where the filesystem has them), so nothing written through a deployment reaches the cache.
Used by the artifact cache (:mod:`tritonsuite.deploy.export`), suite-trained checkpoints
(:mod:`tritonsuite.models.training`) and unpacked datasets (:mod:`tritonsuite.models.datasets`)."""
from __future__ import annotations

import fcntl
import os
import shutil
import warnings
from pathlib import Path

from tritonsuite.core.spec import file_digest

_FICLONE = 0x40049409  # linux/fs.h: share the source's extents (btrfs, xfs with reflink, overlayfs on them)


class CacheHealed(UserWarning):
    """A cache entry failed its check and is rebuilt (the notice's category, so a run can filter or count them)."""


def file_record(path: str | os.PathLike) -> dict[str, object]:
    """{"size_bytes", "sha256"} of a file, as a cache entry records it."""
    path = Path(path)
    return {"size_bytes": path.stat().st_size, "sha256": file_digest(path)}


def mismatch(path: str | os.PathLike, size_bytes: int | None, sha256: str | None) -> str | None:
    """Why the file at ``path`` is not what its entry recorded (None when it is): missing, no record, size, sha256."""
    path = Path(path)
    if not path.is_file():
        return f"{path} is missing"
    if not size_bytes or not sha256:
        return f"{path.parent / path.name} has no recorded size and sha256 (written by an older tritonsuite)"
    size = path.stat().st_size
    if size != size_bytes:
        return f"{path} holds {size} bytes, {size_bytes} recorded"
    digest = file_digest(path)
    if digest != sha256:
        return f"{path} has sha256 {digest[:16]}..., {sha256[:16]}... recorded"
    return None


def notice(what: str, reason: str) -> None:
    """The one line a healed cache entry gives: what, why, and that it is rebuilt."""
    warnings.warn(f"cache: {what}: {reason}; rebuilding it", CacheHealed, stacklevel=3)


def private_copy(src: str | os.PathLike, dst: str | os.PathLike) -> str:
    """Copy ``src`` to ``dst`` so that writing one never changes the other: a reflink where the filesystem makes one,
    else a full copy (never a hard link). Returns "reflink" or "copy"."""
    src, dst = Path(src), Path(dst)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            how = "reflink"
        except OSError:
            shutil.copyfileobj(fin, fout, 1 << 20)
            how = "copy"
    shutil.copystat(src, dst)
    return how
