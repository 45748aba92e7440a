"""The shared-memory names a run owns under /dev/shm, in one place for the launchers, the janitor and the client:
the python backend's regions of each launch (``SHM_PREFIX<pid>x<launch>_``) and the client's system shared-memory
regions (``CLIENT_SHM_PREFIX<pid>x<n>_in|out``). Each name carries its owner's pid, so a later run can remove what a
killed one left."""
from __future__ import annotations

import os
import re
from pathlib import Path

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "triton_python_backend_shm_region_ts"  # + "<pid>x<n>_": owner pid and launch number
CLIENT_SHM_PREFIX = "tritonsuite_shm_"  # + "<pid>x<n>_in|out"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_shm() -> list[str]:
    """Remove python-backend regions of earlier launches whose owning process is gone (e.g. killed with -9)."""
    removed = []
    for path in SHM_DIR.glob(f"{SHM_PREFIX}*"):
        match = re.match(rf"{SHM_PREFIX}(\d+)x", path.name)
        if match and not pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def owned_patterns(launch_prefix: str) -> list[str]:
    """Glob patterns of the regions a launch and this process's client own: what the janitor removes if this
    process dies without cleaning up."""
    return [str(SHM_DIR / f"{launch_prefix}*"), str(SHM_DIR / f"{CLIENT_SHM_PREFIX}{os.getpid()}x*")]
