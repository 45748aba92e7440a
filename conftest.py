"""This repository's own pytest configuration. The options, fixtures and hooks come from the tritonsuite plugin
(``src/tritonsuite/plugin``, installed with the package through its ``pytest11`` entry point)."""
