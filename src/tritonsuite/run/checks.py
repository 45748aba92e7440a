"""Checks of option values against the host, once before anything starts: directories to write, checkpoints, a
remote server, the container engine and image, a directory of backends, and outputs kept out of what was handed
in. Each bad value is one :class:`OptionError` line naming it and the valid choices."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.profiles import Profile

REMOTE_CHECK_TIMEOUT_S = 5.0


class OptionError(ValueError):
    """A bad option value: one line naming it and the valid choices (the plugin makes it pytest's usage error)."""


def check_directory_option(option: str, value: str | Path | None) -> None:
    """A directory option (--reports-dir, --repository-dir, --baselines-dir) must name a directory or a path that
    can become one: not an existing file, nor a path under one."""
    if value is None:
        return
    path = Path(value)
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                where = "is a file" if ancestor == path else f"lies under the file {ancestor}"
                raise OptionError(f"{option} {value}: {where}; expected a directory (created when missing)")
            return


def check_checkpoint(model: str, path: Path) -> None:
    """A checkpoint file must load as tensors with ``torch.load(weights_only=True)``: no code runs from a pickle,
    and a file of the wrong kind is one line now rather than a traceback after the server started. (A directory,
    e.g. a Hugging Face checkpoint, is left to the model's own loader.)"""
    if path.is_dir():
        return
    import torch

    try:
        torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise OptionError(f"--checkpoint {model}={path}: not a checkpoint torch.load(weights_only=True) "
                          f"reads ({type(exc).__name__}: {first_line[:200]})") from None


def check_remote(opt, access=None) -> None:
    """Once, before anything starts: ``--triton-url`` answers as a live Triton (bounded wait, with ``access``'s TLS
    and headers), and the gRPC and metrics addresses are host:port, given with --server remote only."""
    from tritonsuite.server.remote import remote_problem

    given = [f"--triton-{k}-url" for k in ("grpc", "metrics") if getattr(opt, f"triton_{k}_url")]
    if opt.server != "remote" and given:
        raise OptionError(f"{given[0]} applies to --server remote, not --server {opt.server} (whose ports "
                          f"the suite knows)")
    problem = opt.server == "remote" and remote_problem(opt.triton_url, opt.triton_grpc_url, opt.triton_metrics_url,
                                                        REMOTE_CHECK_TIMEOUT_S, **({"access": access} if access else
                                                                                   {}))
    if problem:
        raise OptionError(problem)


def check_container(image: str, gpus: str, profile: Profile) -> str:
    """Once, before anything starts: the --gpus value, the docker SDK, an engine that answers (bounded), and the
    image on it. Returns the GPUs to request (default: all for a GPU profile, none otherwise)."""
    from tritonsuite.server import ServerError
    from tritonsuite.server.docker import docker_client, parse_gpus

    gpus = gpus or ("all" if profile.device == "gpu" else "none")
    try:
        parse_gpus(gpus)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if profile.device == "gpu" and gpus == "none":
        raise OptionError(f"--gpus none: profile {profile.name!r} runs models on a GPU; valid choices: all, or "
                          f"device ids (0,1)")
    try:
        client = docker_client()
    except ServerError as exc:
        raise OptionError(str(exc)) from None
    try:
        client.images.get(image)
    except Exception:
        raise OptionError(f"--image {image}: not on the Docker engine; pull it first (docker pull {image}), "
                          f"or build the local image (tritonsuite "
                          f"build-local-image, then --image tritonsuite-local:latest)") from None
    finally:
        client.close()
    return gpus


def server_flags(flags, server: str) -> tuple[str, ...]:
    """--triton-server-flag NAME=VALUE (repeatable) as tritonserver arguments (``--NAME=VALUE``), for a server the
    suite starts."""
    found = []
    for flag in flags or ():
        name, equals, value = str(flag).removeprefix("--").partition("=")
        if not name or not equals or not name.replace("-", "").replace("_", "").isalnum():
            raise OptionError(f"--triton-server-flag {flag!r}: expected NAME=VALUE, e.g. rate-limit=execution_count")
        found.append(f"--{name}={value}")
    if found and server == "remote":
        raise OptionError("--triton-server-flag applies to --server embedded or container; a remote server runs "
                          "with its operator's flags")
    return tuple(found)


def check_backend_directory(directory: str | None, server: str) -> None:
    """--backend-directory: a directory of Triton backends as libraries, for a server the suite starts."""
    if not directory:
        return
    if server == "remote":
        raise OptionError("--backend-directory applies to --server embedded or container; a remote server "
                          "serves with its own backends")
    from tritonsuite.deploy.backends import native_backends

    if not Path(directory).is_dir():
        raise OptionError(f"--backend-directory {directory}: no such directory")
    if not native_backends(directory):
        raise OptionError(f"--backend-directory {directory}: holds no backend library; expected "
                          f"<name>/libtriton_<name>.so, e.g. onnxruntime/libtriton_onnxruntime.so or "
                          f"pytorch/libtriton_pytorch.so (as in an NGC image's /opt/tritonserver/backends)")


def handed_in_directories(opt, profile) -> list[tuple[str, Path]]:
    """The directories the user handed in as input: model repositories, profiles, and --input-data, --checkpoint
    or --dataset values that are directories."""
    found = [("--model-repository", r) for r in opt.model_repository]
    if profile.model_repository:
        found.append((f"{profile.name}.yaml:model_repository", profile.model_repository))
    if opt.profiles_dir:
        found.append(("--profiles-dir", opt.profiles_dir))
    for option, values in (("--input-data", opt.input_data), ("--checkpoint", opt.checkpoint),
                           ("--dataset", opt.dataset)):
        found += [(option, v if Path(v).exists() else v.partition("=")[2] or v) for v in values]
    return [(option, Path(p).resolve()) for option, p in found if Path(p).is_dir()]


def check_outputs_apart(opt, profile, outputs: dict[str, Path], root: Path) -> None:
    """Nothing the suite writes may land in a directory handed in as input (a Triton server pointed at a model
    repository would find the suite's directories beside the models): one line naming both, and the way out."""
    for option, directory in handed_in_directories(opt, profile):
        for name, out in outputs.items():
            if out == directory or directory in out.parents:
                raise OptionError(
                    f"{option} {directory}: {name} {out} would lie inside it, and the suite never writes in a "
                    f"directory handed in as input; give {name} outside it (by default outputs go under pytest's "
                    f"rootdir, here {root}: run pytest from another directory)")
