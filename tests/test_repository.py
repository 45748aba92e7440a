"""The refused deployments of --model-repository, as the plugin ships the test (any project collects it the same
way): each fails in whichever scenario runs."""
from tritonsuite.plugin.scenarios import test_repository  # noqa: F401
