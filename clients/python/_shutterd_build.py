# SPDX-License-Identifier: Apache-2.0
"""The package's build backend: setuptools' own (setuptools.build_meta), run on a copy of the
source in a temporary directory, so that a build (``pip install ./clients/python``, ``pip
wheel``, ``python3 -m build``) leaves nothing in the source tree. setuptools itself has no
setting for it: it writes ``build/`` and ``shutterd.egg-info`` beside the sources it builds,
whatever directory pip asks the wheel or the metadata to go to. An editable install
(``pip install -e``) must point into the source itself: its hooks are setuptools' own.

Named in pyproject.toml (``build-backend``, with ``backend-path = ["."]``); not part of the
installed package.
"""

import contextlib
import os
import shutil
import tempfile

from setuptools import build_meta as _setuptools

# What a build or a test run leaves in a source tree: not copied, so not built from.
_LEFTOVERS = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".benchmarks")


@contextlib.contextmanager
def _in_a_copy():
    """Runs the block in a copy of the source (the working directory), then removes it."""
    source = os.getcwd()
    scratch = tempfile.mkdtemp(prefix="shutterd-build-")
    copy = os.path.join(scratch, "src")
    shutil.copytree(source, copy, ignore=_LEFTOVERS)
    os.chdir(copy)
    try:
        yield
    finally:
        os.chdir(source)
        shutil.rmtree(scratch, ignore_errors=True)


def get_requires_for_build_wheel(config_settings=None):
    with _in_a_copy():
        return _setuptools.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _in_a_copy():
        return _setuptools.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    out = os.path.abspath(metadata_directory)
    with _in_a_copy():
        return _setuptools.prepare_metadata_for_build_wheel(out, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    out = os.path.abspath(wheel_directory)
    metadata = os.path.abspath(metadata_directory) if metadata_directory else None
    with _in_a_copy():
        return _setuptools.build_wheel(out, config_settings, metadata)


def build_sdist(sdist_directory, config_settings=None):
    out = os.path.abspath(sdist_directory)
    with _in_a_copy():
        return _setuptools.build_sdist(out, config_settings)


# Editable installs point into the source tree: setuptools' hooks, in place.
for _hook in ("get_requires_for_build_editable", "prepare_metadata_for_build_editable", "build_editable"):
    if hasattr(_setuptools, _hook):
        globals()[_hook] = getattr(_setuptools, _hook)
del _hook
