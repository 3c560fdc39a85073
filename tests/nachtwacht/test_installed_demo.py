"""The demo works from the built wheel, away from any checkout: the wheel holds neither the tests
nor the benchmarks, every module of the installed `nachtwacht` package imports without them, and
the demo's own world starts its `nachtwacht` children from the installed package.

The wheel is built from this checkout (pip's cache supplies the build backend) and installed
without its dependencies into a fresh virtual environment, which borrows them from this
interpreter's environment by path only: this environment's editable install of the checkout is
not read there, so nothing can be imported from the checkout by accident.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.worlds.processes import REPO_ROOT

pytestmark = pytest.mark.slow

# A deadline for a failure, never a speed assertion: building a wheel takes seconds.
BUILD_DEADLINE_SECONDS = 240
# What a checkout holds besides its source: environments, caches, earlier builds.
NOT_SOURCE = (
    ".venv",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # a working directory with no checkout in or above it

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def run(self, *command: str | Path) -> subprocess.CompletedProcess[str]:
        # Nothing that could lead back to the checkout: no PYTHONPATH, no nachtwacht settings.
        env = {
            k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("NACHT")
        }
        return subprocess.run(
            [str(part) for part in command],
            cwd=self.outside,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=BUILD_DEADLINE_SECONDS,
        )


def _pip(*args: str | Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *map(str, args)],
        check=True,
        capture_output=True,
        timeout=BUILD_DEADLINE_SECONDS,
    )


def _built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's wheel, built once per test run: the workers of one run share a folder
    above their own, and the first to take its lock builds for all of them."""
    shared = tmp_path_factory.getbasetemp().parent / "installed-demo-wheel"
    shared.mkdir(exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted((shared / "dist").glob("nachtwacht-*.whl"))
        if not built:
            # Built from a copy: setuptools builds in its source folder, and a `build/` it left
            # in the checkout would keep copies of modules deleted since, which the next wheel
            # would ship.
            source = shared / "source"
            shutil.rmtree(source, ignore_errors=True)
            shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
            _pip("wheel", "--no-deps", "--wheel-dir", shared / "dist", source)
            built = sorted((shared / "dist").glob("nachtwacht-*.whl"))
    (wheel,) = built
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("installed")
    wheel = _built_wheel(tmp_path_factory)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    _pip("--python", venv / "bin" / "python", "install", "--no-deps", wheel)
    # The dependencies by path: a line naming a directory adds it, without running the .pth
    # files inside it (this environment's editable finder for the checkout is one).
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    (purelib / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    outside = root / "elsewhere"
    outside.mkdir()
    yield Installed(wheel=wheel, venv=venv, outside=outside)


def test_the_wheel_holds_no_tests_and_no_benchmarks(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert "tests" not in tops
    assert "bench" not in tops
    assert "nachtwacht" in tops


def test_the_installed_environment_cannot_see_the_checkout(installed: Installed) -> None:
    # Without this, the imports below could pass by finding the checkout's copies.
    probe = installed.run(installed.python, "-c", "import tests.worlds")
    assert probe.returncode == 1
    assert "No module named 'tests'" in probe.stderr


def test_every_module_of_the_installed_package_imports(installed: Installed) -> None:
    script = textwrap.dedent(
        """
        import importlib, pkgutil, nachtwacht
        for module in pkgutil.walk_packages(nachtwacht.__path__, "nachtwacht."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
        print(nachtwacht.__file__)
        """
    )
    result = installed.run(installed.python, "-c", script)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(installed.venv)


def test_the_installed_demo_command_answers(installed: Installed) -> None:
    result = installed.run(installed.venv / "bin" / "nachtwacht", "demo", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: nachtwacht demo")


def test_the_demo_world_starts_its_children_from_the_installed_package(
    installed: Installed,
) -> None:
    # A release key and a signed build, as the demo makes them: three `nachtwacht release`
    # children of the installed interpreter, each importing the installed package.
    script = textwrap.dedent(
        """
        from pathlib import Path
        from datetime import UTC, datetime
        from nachtwacht.demo_world.clocks import showing_now
        from nachtwacht.demo_world.release_tooling import make_release_key, sign_build
        keys = Path("keys")
        make_release_key(keys)
        build = sign_build(
            version="1.0.0", manifest_version=1, keys_dir=keys, workdir=Path("builds"),
            clock_setting=showing_now(datetime(2026, 11, 30, tzinfo=UTC)).setting(),
        )
        print(build.manifest.read_text())
        """
    )
    result = installed.run(installed.python, "-c", script)
    assert result.returncode == 0, result.stderr
    assert '"agent_version":"1.0.0"' in result.stdout.replace(" ", "")
