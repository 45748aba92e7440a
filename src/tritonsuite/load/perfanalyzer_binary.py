"""The perf_analyzer binary the suite runs: ``tritonclient==2.51.0``'s, fetched once from its Linux x86_64 wheel
with the wheel and the member checked against pinned sha256, or ``TRITONSUITE_PERF_ANALYZER``; the libraries it
links, found in the nvidia-pytriton wheel under their plain names; and a check that it starts, in one line when it
does not (:class:`PerfAnalyzerUnavailable`)."""
from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tritonsuite.load.point import MeasurementError
from tritonsuite.models.datasets import DatasetError, data_cache_dir, wheel_member

DISTRIBUTION, VERSION = "tritonclient", "2.51.0"
WHEEL_PLATFORM = "manylinux1_x86_64"
#: tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl
WHEEL_SHA256 = "c485bb0123bdf310f90bc8b03d3489b28df2ffed55b30c7eee0b795b48113d52"
MEMBER = "tritonclient-2.51.0.data/data/bin/perf_analyzer"
MEMBER_SHA256 = "a8e3fa6d2fcd535770f18fa3c9baf21aee85697352637d24c6b2818401c95a34"
#: the name rows carry in ``Row.loadgen`` and the measurement's ``loadgen``
LOADGEN = "perf_analyzer"
LOADGEN_DESCRIPTION = "perf_analyzer 2.51"
#: plain name perf_analyzer links -> glob of the hashed file in nvidia_pytriton.libs/
LIBRARIES = {"libb64.so.0d": "libb64-*.so.0d", "libcudart.so.12": "libcudart-*.so.12*"}
BINARY_ENV = "TRITONSUITE_PERF_ANALYZER"
START_TIMEOUT_S = 15.0


class PerfAnalyzerUnavailable(MeasurementError):
    """perf_analyzer cannot be obtained or started here; the message is one line saying why."""


@dataclass(frozen=True)
class PerfAnalyzer:
    """A perf_analyzer binary that starts here, and the library directory it needs on ``LD_LIBRARY_PATH``."""

    binary: Path
    lib_dir: Path | None
    version: str = VERSION

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        if self.lib_dir is not None:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [str(self.lib_dir), env.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
        return env


# ------------------------------------------------------------------------------------------ binary and libraries
def fetch_binary(cache: Path | None = None, download: Callable[[Path], None] | None = None) -> Path:
    """The pinned perf_analyzer of ``tritonclient==2.51.0``'s Linux x86_64 wheel, fetched once (executable)."""
    machine = platform.machine()
    if platform.system() != "Linux" or machine not in ("x86_64", "AMD64"):
        raise PerfAnalyzerUnavailable(f"perf_analyzer {VERSION} ships for Linux x86_64 only; this host is "
                                      f"{platform.system()} {machine} (set {BINARY_ENV} to a binary of your own)")
    try:
        path = wheel_member(DISTRIBUTION, VERSION, MEMBER, MEMBER_SHA256, model="perf_analyzer",
                            wheel_sha256=WHEEL_SHA256, platform=WHEEL_PLATFORM, cache=cache, download=download,
                            hint=f"set {BINARY_ENV} to a perf_analyzer binary of your own")
    except DatasetError as exc:
        raise PerfAnalyzerUnavailable(f"perf_analyzer cannot be obtained: {exc}") from None
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def pytriton_libs() -> Path:
    """``nvidia_pytriton.libs/`` of the installed nvidia-pytriton wheel (the embedded server's libraries)."""
    import importlib.metadata

    try:
        libs = Path(importlib.metadata.distribution("nvidia-pytriton").locate_file("nvidia_pytriton.libs"))
    except importlib.metadata.PackageNotFoundError:
        raise PerfAnalyzerUnavailable("perf_analyzer needs libb64 and libcudart, taken from the nvidia-pytriton "
                                      "wheel, which is not installed (pip install nvidia-pytriton)") from None
    if not libs.is_dir():
        raise PerfAnalyzerUnavailable(f"nvidia-pytriton has no library directory at {libs}")
    return libs


def library_dir(target: Path, source: Path | None = None) -> Path:
    """``target`` holding a link per :data:`LIBRARIES` plain name to the hashed file in ``source`` (default: the
    nvidia-pytriton wheel's libraries). Links are replaced atomically, so concurrent callers agree."""
    source = Path(source) if source is not None else pytriton_libs()
    target.mkdir(parents=True, exist_ok=True)
    for plain, pattern in LIBRARIES.items():
        found = sorted(source.glob(pattern))
        if not found:
            raise PerfAnalyzerUnavailable(f"perf_analyzer needs {plain}: no {pattern} in {source}")
        link = target / plain
        if link.is_symlink() and Path(os.readlink(link)) == found[0]:
            continue
        part = target / f".{plain}.{os.getpid()}"
        part.unlink(missing_ok=True)
        os.symlink(found[0], part)
        os.replace(part, link)
    return target


def check_starts(pa: PerfAnalyzer) -> str:
    """Run ``perf_analyzer --version`` (bounded); its version line, or :class:`PerfAnalyzerUnavailable` with the
    loader's or the binary's own first error line."""
    try:
        proc = subprocess.run([str(pa.binary), "--version"], capture_output=True, text=True, env=pa.environment(),
                              stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise PerfAnalyzerUnavailable(f"{pa.binary} --version did not answer within {START_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise PerfAnalyzerUnavailable(f"{pa.binary} cannot start: {exc.strerror or exc}") from None
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
        raise PerfAnalyzerUnavailable(f"{pa.binary} cannot start (exit {proc.returncode}): {line}")
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def locate(cache: Path | None = None, download: Callable[[Path], None] | None = None,
           libs: Path | None = None) -> PerfAnalyzer:
    """A perf_analyzer that starts here: ``$TRITONSUITE_PERF_ANALYZER``, else the pinned one (fetched once), with
    its library directory under the data cache; checked with ``--version``."""
    cache = Path(cache or data_cache_dir())
    own = os.environ.get(BINARY_ENV)
    if own:
        if not Path(own).is_file():
            raise PerfAnalyzerUnavailable(f"{BINARY_ENV}={own}: no such file")
        binary = Path(own)
    else:
        binary = fetch_binary(cache, download)
    lib_dir = library_dir(cache / f"{DISTRIBUTION}-{VERSION}" / "lib", libs)
    pa = PerfAnalyzer(binary, lib_dir)
    check_starts(pa)
    return pa


@lru_cache(maxsize=1)
def default() -> PerfAnalyzer:
    """:func:`locate` once per process (a failure is raised again at each call, not cached)."""
    return locate()


def unavailable_reason() -> str | None:
    """None when perf_analyzer starts here, else the one-line reason (for skips and reports)."""
    try:
        default()
    except PerfAnalyzerUnavailable as exc:
        return str(exc)
    return None
