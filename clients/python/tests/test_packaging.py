# SPDX-License-Identifier: Apache-2.0
"""`pip install ./clients/python` into a fresh virtualenv, offline (Debian 12's setuptools
builds it), and what the installed distribution holds."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import shutterd

SOURCE = os.environ.get("SHUTTERD_TEST_SOURCE") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def sh(*cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kw)
    assert r.returncode == 0, "%s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout)
    return r.stdout


@pytest.fixture
def source(tmp_path):
    """A copy of clients/python, so that building leaves nothing in the tree."""
    dst = tmp_path / "python"
    shutil.copytree(SOURCE, str(dst), ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache", "dist"))
    return str(dst)


def test_the_tests_use_the_installed_package_when_the_tier_says_so():
    if "SHUTTERD_TEST_SOURCE" not in os.environ:
        pytest.skip("run from the source tree (Tests/python/run.sh installs the package first)")
    assert not os.path.abspath(shutterd.__file__).startswith(os.path.abspath(SOURCE) + os.sep)
    assert "site-packages" in shutterd.__file__


@pytest.fixture
def venv(tmp_path):
    """A fresh venv of the system's Python that sees its packages (setuptools, wheel)."""
    path = str(tmp_path / "venv")
    sh("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, "-m", "venv",
       "--system-site-packages", path)
    return path


def test_pip_install_of_the_directory_into_a_fresh_venv(tmp_path, source, venv):
    py = os.path.join(venv, "bin", "python")
    sh(py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-build-isolation", "--no-index", source,
       cwd=str(tmp_path))
    out = sh(py, "-c", "import shutterd, shutterd.aio, shutterd.pytest_plugin, importlib.metadata as m;"
             "print(shutterd.__file__);"
             "print([e.value for e in m.distribution('shutterd').entry_points if e.group == 'pytest11']);"
             "print(m.metadata('shutterd')['Requires-Python'])", cwd=str(tmp_path))
    where, eps, requires = out.split("\n")[:3]
    assert where.startswith(venv)
    assert eps == "['shutterd.pytest_plugin']"
    assert requires == ">=3.9"


def _files(top):
    return sorted(os.path.relpath(os.path.join(d, n), top) for d, dirs, files in os.walk(top) for n in dirs + files)


def test_building_and_installing_leave_nothing_in_the_source_directory(tmp_path, source, venv):
    # pip builds in the directory it is given: the backend (_shutterd_build.py) builds in a
    # copy, so no build/ or shutterd.egg-info is left here (.gitignore would hide them from git).
    before = _files(source)
    py = os.path.join(venv, "bin", "python")
    quiet = ("-q", "--disable-pip-version-check", "--no-build-isolation", "--no-index")
    sh(py, "-m", "pip", "install", *quiet, source, cwd=str(tmp_path))
    sh(py, "-m", "pip", "wheel", *quiet, "--no-deps", "-w", str(tmp_path / "dist"), source, cwd=str(tmp_path))
    sh(py, "-c", "import _shutterd_build as b; b.build_sdist(%r)" % str(tmp_path / "sdist"), cwd=source)
    assert _files(source) == before
    out = sh(py, "-c", "import shutterd.testing as t; print(t.recording('ab-shutter3-volumeup.evemu'))",
             cwd=str(tmp_path))
    assert out.strip().startswith(venv) and os.path.isfile(out.strip())


def test_the_wheel_holds_the_package_its_type_marker_and_the_entry_point(tmp_path, source, venv):
    sh(os.path.join(venv, "bin", "python"), "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-build-isolation", "--no-index",
       "--no-deps", "-w", str(tmp_path / "dist"), source, cwd=str(tmp_path))
    wheels = os.listdir(str(tmp_path / "dist"))
    assert len(wheels) == 1 and wheels[0].startswith("shutterd-") and wheels[0].endswith("-py3-none-any.whl")
    with zipfile.ZipFile(str(tmp_path / "dist" / wheels[0])) as z:
        names = z.namelist()
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for module in ("__init__", "_client", "_protocol", "aio", "pytest_plugin", "testing"):
        assert "shutterd/%s.py" % module in names
    assert "shutterd/py.typed" in names
    assert "shutterd/recordings/ab-shutter3-volumeup.evemu" in names
    assert "_shutterd_build.py" not in names
    assert not any(n.startswith("tests/") for n in names)
    assert "[pytest11]\nshutterd = shutterd.pytest_plugin" in entry_points
