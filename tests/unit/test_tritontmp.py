"""The sweep of what killed Triton servers leave in /tmp (server/tritontmp.py), on directories of the test's own with
the running cores given: which directories are Triton's, and which no running server can have made."""
import os
import time

import pytest

from tritonsuite.server.tritontmp import MARGIN_S, sweep_triton_tmp, triton_cores, triton_leftovers


def _made(base, name, config=True):
    path = base / name
    path.mkdir()
    if config:
        (path / "config.pbtxt").write_text('name: "m"\n')
    return path


def _tritons(base):
    env = _made(base, "python_env_Ab12Cd", config=False)
    folder = _made(base, "folderXy34Zw")
    (folder / "1").mkdir()
    time.sleep(0.02)  # the directories' ctime strictly before the sweep's "now"
    return env, folder, max(p.lstat().st_ctime for p in (env, folder))


def test_a_directory_made_after_a_running_core_started_is_kept(tmp_path):
    env, folder, made = _tritons(tmp_path)
    assert sweep_triton_tmp(tmp_path, cores=[(1, made - 1.0)]) == []
    assert env.is_dir() and folder.is_dir()
    # within the margin of the start time's rounding too
    assert sweep_triton_tmp(tmp_path, cores=[(1, made + MARGIN_S / 2)]) == []
    assert env.is_dir() and folder.is_dir()


def test_a_directory_older_than_every_running_core_is_removed(tmp_path):
    env, folder, made = _tritons(tmp_path)
    later = made + MARGIN_S + 1.0
    assert sorted(sweep_triton_tmp(tmp_path, cores=[(1, later), (2, later + 60)])) == [folder.name, env.name]
    assert not env.exists() and not folder.exists()


def test_with_no_core_running_every_leftover_is_removed(tmp_path):
    env, folder, _ = _tritons(tmp_path)
    assert sorted(sweep_triton_tmp(tmp_path, cores=[])) == [folder.name, env.name]
    assert not env.exists() and not folder.exists()


def test_what_is_not_triton_s_is_left_alone(tmp_path):
    kept = [_made(tmp_path, "folderNoCfg1", config=False),  # another program's folderXXXXXX
            _made(tmp_path, "python_env_TooLong1", config=False),
            _made(tmp_path, "python_env_Ab12C", config=False),
            _made(tmp_path, "myfolderAb12Cd")]
    (tmp_path / "python_env_File01").write_text("a file")
    target = _made(tmp_path, "elsewhere", config=False)
    (tmp_path / "python_env_Link01").symlink_to(target, target_is_directory=True)
    time.sleep(0.02)
    assert triton_leftovers(tmp_path) == []
    assert sweep_triton_tmp(tmp_path, cores=[]) == []
    assert all(p.is_dir() for p in kept + [target]) and (tmp_path / "python_env_File01").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_user_s_directories_are_left_alone(tmp_path):
    theirs = _made(tmp_path, "python_env_Theirs")
    os.chown(theirs, 54321, -1)
    time.sleep(0.02)
    assert sweep_triton_tmp(tmp_path, cores=[]) == []
    assert theirs.is_dir()


def test_a_process_without_triton_is_no_core():
    assert os.getpid() not in {pid for pid, _ in triton_cores()}  # pytest maps no libtritonserver
