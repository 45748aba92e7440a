"""``python -m tritonsuite.server build-local-image [TAG]``: import the empty-root image (default
``tritonsuite-local:latest``) that runs the wheel's tritonserver in a container with read-only host mounts, on the
engine ``docker.from_env()`` finds (DOCKER_HOST). No registry needed."""
from __future__ import annotations

import sys

from tritonsuite.server.base import ServerError
from tritonsuite.server.container import LOCAL_IMAGE, build_local_image


def main(argv: list[str]) -> int:
    if argv[:1] != ["build-local-image"] or len(argv) > 2:
        sys.stderr.write("usage: python -m tritonsuite.server build-local-image [TAG]\n")
        return 2
    tag = argv[1] if len(argv) > 1 else LOCAL_IMAGE
    try:
        image_id = build_local_image(tag=tag)
    except ServerError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    print(f"{tag} {image_id}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
