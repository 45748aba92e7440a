"""pytest's rootdir as the test paths alone decide it, and the one directory the suite's outputs default to.

Why the rootdir can be wrong: pytest decides its rootdir and ini file (``Config.parse`` ->
``_pytest.config.findpaths.determine_setup``) from a first parse of the command line that runs *before* it loads
plugins from entry points. At that moment the suite's options are unknown, so argparse's ``parse_known_args`` sets
``--model-repository`` aside as an unknown flag and takes the next word, ``/team/repo``, for a test path.
``determine_setup`` then looks for an ini file above ``/team/repo``, finds none and roots the run there (or at the
common ancestor of that directory and the invocation directory). Written ``--model-repository=/team/repo``, the
value stays glued to its flag and is no path. Any option's value that names an existing file or directory does it
(``--profiles-dir DIR``, ``--input-data DIR``, ``--checkpoint``...). A wrong rootdir means: ``reports/`` and
``model_repos/`` (which default to the rootdir) land in the user's directory, the project's ini file is not read
(its ``addopts`` such as ``-p no:cacheprovider``, its markers and testpaths), and pytest's own cache lands there too.

:func:`correct_rootdir` runs in ``pytest_load_initial_conftests``: the first hook after every plugin's options are
known, before conftests load and before the command line is parsed for good. It asks ``determine_setup`` again
with the test paths as parsed now and, where the answer differs, sets pytest's rootdir, ini file and ini values to
that answer (the ini file's ``addopts``, ``-p`` and ``pythonpath`` included): the run is rooted as if every value
had been written ``--opt=value``. :func:`output_root` is the rule for the suite's outputs.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

ROOT_KEY = pytest.StashKey[Path]()


def output_root(config) -> Path:
    """Where ``reports/``, ``model_repos/`` (with its ``.cache/``) and ``fixtures/baselines/`` default to: pytest's
    rootdir as the test paths and the ini file decide it (the directory of the ``pytest.ini``, ``pyproject.toml``,
    ``tox.ini`` or ``setup.cfg`` found from the test paths given, else from the invocation directory; without
    one, the invocation directory), never from an option's value."""
    return config.stash.get(ROOT_KEY, None) or config.rootpath


def setup_from_test_paths(config):
    """pytest's (rootdir, ini file, ini values, ignored ini files) for this command line's test paths only."""
    from _pytest.config.findpaths import determine_setup

    ns = config.known_args_namespace
    return determine_setup(inifile=ns.inifilename, override_ini=ns.override_ini, args=ns.file_or_dir,
                           rootdir_cmd_arg=ns.rootdir or None, invocation_dir=config.invocation_params.dir)


_PRIVATE = ("_rootpath", "_inipath", "_inicfg", "_inicache", "_parser", "known_args_namespace")


def correct_rootdir(config, args: list[str]) -> None:
    """Root the run where its test paths (not an option's value) put it; ``args`` is the command line pytest is
    parsing (extended in place by the right ini file's ``addopts``)."""
    try:
        rootpath, inipath, inicfg, ignored = setup_from_test_paths(config)
    except Exception:  # an error of pytest's own about these paths: pytest reports it
        return
    config.stash[ROOT_KEY] = rootpath
    if (rootpath, inipath) == (config.rootpath, config.inipath) or not all(hasattr(config, a) for a in _PRIVATE):
        return  # (a pytest whose internals differ: the rootdir stays, the suite's outputs still go to rootpath)
    old_addopts = [str(a) for a in config.getini("addopts")]
    old_pythonpath = [str(p) for p in config.getini("pythonpath")]
    config._rootpath, config._inipath, config._inicfg = rootpath, inipath, inicfg
    if hasattr(config, "_ignored_config_files"):
        config._ignored_config_files = ignored
    config._inicache.clear()
    config._parser.extra_info.update(rootdir=str(rootpath), inifile=str(inipath))
    addopts = [str(a) for a in config.getini("addopts")]
    if old_addopts and args[:len(old_addopts)] == old_addopts:
        del args[:len(old_addopts)]
    args[:0] = addopts
    for path in old_pythonpath:
        if path in sys.path:
            sys.path.remove(path)
    for path in reversed([str(p) for p in config.getini("pythonpath")]):
        sys.path.insert(0, path)
    config.known_args_namespace = config._parser.parse_known_args(args, namespace=copy.copy(config.option))
    config.pluginmanager.consider_preparse(addopts, exclude_only=False)  # -p no:cacheprovider and the like
    if config.known_args_namespace.confcutdir is None:
        config.known_args_namespace.confcutdir = str(inipath.parent if inipath is not None else rootpath)
    rewrite = getattr(config.pluginmanager, "rewrite_hook", None)
    if hasattr(rewrite, "fnpats"):  # assertion rewriting read python_files from the wrong ini file
        rewrite.fnpats = config.getini("python_files")
    for check in ("_checkversion", "_validate_plugins"):  # minversion, required_plugins of the right ini file
        if hasattr(config, check):
            getattr(config, check)()
