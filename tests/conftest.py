"""Fixtures shared by the suite's own integration tests."""
from __future__ import annotations

import pytest

from tritonsuite.deploy.export import export
from tritonsuite.models import default_registry
from tritonsuite.deploy.repository import build_deployment, model_config


#: the longest test files, started first, longest first: on two xdist workers (CI's --dist loadfile) a long file handed
#: out last runs on one worker while the other idles. Their times in CI's run of 2026-11-28 (junit, seconds): corpus
#: 447 (468 on cd98de6, in one test: now two halves, one file each, started together), kinds repository 131, user
#: model 110, faults 99, mix interference 94; the next is under 75.
FIRST = ("tests/test_corpus.py", "tests/test_corpus_kinds.py", "tests/test_kinds_repository.py", "tests/test_user_model.py", "tests/test_faults.py",
         "tests/test_mix_interference.py")


def pytest_configure(config):
    """xdist's default --loadscope-reorder hands the files with the most tests out first, which put the corpus (one
    test, the longest) among the last: the collection's own order (FIRST, then the rest) is kept instead."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(FIRST)))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def shared_export_cache(tmp_path_factory):
    """One artifact cache for every end-to-end run of the session (tests.helpers.run_pytest passes --cache-dir)."""
    from tests import helpers

    helpers.SHARED_CACHE = tmp_path_factory.mktemp("export-cache")
    yield helpers.SHARED_CACHE
    helpers.SHARED_CACHE = None


@pytest.fixture(scope="module")
def identity_repo(tmp_path_factory):
    """A model repository holding the tiny identity model as an ONNX deployment (max batch size 8)."""
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path_factory.mktemp("cache"))
    repo = tmp_path_factory.mktemp("repo")
    build_deployment(repo, model_config("identity", spec, artifact.format, max_batch_size=8), artifact)
    return repo


@pytest.fixture(scope="module")
def pa():
    """The pinned perf_analyzer (fetched once), or a skip with the reason it cannot run here."""
    from tritonsuite.load import perfanalyzer

    reason = perfanalyzer.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return perfanalyzer.default()
