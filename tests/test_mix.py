"""The mixed-load scenario, as the plugin ships it (any project collects it the same way)."""
from tritonsuite.plugin.scenarios import test_mix  # noqa: F401
