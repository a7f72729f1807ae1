"""The one build step pyproject.toml cannot say: the shipped scenarios live at the repository's top
level (``scenarios/``, one copy, where a reader of the repository finds them) and the wheel carries them as
package data at ``loadkit/scenarios/*.toml``, where an installed loadkit looks for them
(loadkit/workload/shipped.py). setuptools' ``package-dir`` cannot map one data-only subpackage
beside ``packages.find``, so build_py copies them. An editable install reads the checkout's
``scenarios/`` in place."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


class BuildPy(build_py):
    """build_py, plus ``scenarios/*.toml`` copied into the built package as ``loadkit/scenarios/``."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "loadkit" / "scenarios"
        self.mkpath(str(target))
        for source in sorted(SCENARIOS.glob("*.toml")):
            self.copy_file(str(source), str(target / source.name))


setup(cmdclass={"build_py": BuildPy})
