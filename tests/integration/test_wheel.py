"""The wheel holds zlog alone, and installs and runs in a virtualenv of its own.

The package list once matched `zlog*`, which took the fault harness (`zlog_jepsen`) in too: an
install such as /opt/zlog (README) carried a package that imported the tests, which no wheel
holds. Now the testbed, the harness, the benchmarks and the tests are tools of a source
checkout, and what an operator installs is the broker, the client library and the CLI.

The wheel is built as the README builds it (`pip wheel --no-deps`) from a copy of the
checkout's packages and pyproject.toml, so that the build writes nothing into the checkout and
finds every package the checkout has. It is installed with its declared dependencies into a
fresh virtualenv that sees no other site-packages, and run from a directory away from the
checkout: what it imports there is what the wheel and its dependencies bring. pip takes the
dependencies and the build backend from wherever this machine's pip configuration points (the
index `make setup` installs from), from its cache after the first run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import zlog
from zlog_testbed.broker_process import REPO_ROOT

pytestmark = pytest.mark.slow

PIP_TIMEOUT_S = 240.0  # a first build fetches setuptools, a first install numpy and pyzmq
RUN_TIMEOUT_S = 120.0
OPTIONAL_PACKAGES = ("zlog.spark",)  # extras the wheel's dependencies do not bring (PySpark)
# Imports every module of the installed zlog but the optional ones, then prints where zlog
# came from and which of the checkout's other packages this interpreter can import.
_IMPORT_EVERYTHING = """
import importlib, importlib.util, pkgutil, sys, zlog
optional = tuple(sys.argv[1:])
modules = [m.name for m in pkgutil.walk_packages(zlog.__path__, "zlog.")
           if not m.name.endswith(".__main__")
           and not any(m.name == o or m.name.startswith(o + ".") for o in optional)]
for name in modules:
    importlib.import_module(name)
print(len(modules))
print(zlog.__file__)
for name in ("zlog_testbed", "zlog_jepsen", "tests", "bench"):
    if importlib.util.find_spec(name) is not None:
        print(name)
"""


def _run(command: list[str], cwd: Path, timeout_s: float) -> str:
    """`command`'s output; the test fails with all of it if the command fails. PYTHONPATH and
    the checkout's virtualenv are kept out of its environment."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    completed = subprocess.run(command, cwd=cwd, env=environment, capture_output=True,
                               text=True, timeout=timeout_s, check=False)
    assert completed.returncode == 0, (
        f"{' '.join(command)} exited {completed.returncode}:\n"
        f"{completed.stdout}\n{completed.stderr}")
    return completed.stdout


def _copy_of_the_checkout(destination: Path) -> Path:
    """pyproject.toml, the README it names, and every top-level package of the checkout."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, destination / name)
    for package in REPO_ROOT.iterdir():
        if (package / "__init__.py").is_file():
            shutil.copytree(package, destination / package.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
    return destination


@pytest.mark.timeout(2 * PIP_TIMEOUT_S + 3 * RUN_TIMEOUT_S)
def test_the_wheel_holds_zlog_alone_and_runs_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    source = _copy_of_the_checkout(tmp_path / "source")
    assert {"zlog", "zlog_jepsen", "zlog_testbed", "tests"} <= {
        path.name for path in source.iterdir()}, "the copy has every package to leave out"
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
          "--wheel-dir", str(wheels), str(source)], tmp_path, PIP_TIMEOUT_S)
    (wheel,) = wheels.glob("zlog-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert tops == {"zlog", f"zlog-{zlog.__version__}.dist-info"}, sorted(tops)

    venv = tmp_path / "venv"  # no --system-site-packages: it sees only what goes into it
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, RUN_TIMEOUT_S)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          str(wheel)], tmp_path, PIP_TIMEOUT_S)

    elsewhere = tmp_path / "elsewhere"  # no zlog/ here for `python -c` to find first
    elsewhere.mkdir()
    version = _run([str(venv / "bin" / "zlog"), "--version"], elsewhere, RUN_TIMEOUT_S)
    assert version.strip() == f"zlog {zlog.__version__}"

    imported, origin, *importable = _run(
        [str(python), "-c", _IMPORT_EVERYTHING, *OPTIONAL_PACKAGES], elsewhere,
        RUN_TIMEOUT_S).splitlines()
    assert Path(origin).is_relative_to(venv), f"zlog came from {origin}, not the wheel"
    assert int(imported) > 100, f"only {imported} modules of zlog found"
    assert importable == [], f"the virtualenv can import {importable}"
