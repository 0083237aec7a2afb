"""The pip-installable package (python/pyproject.toml): one version number (the repository's VERSION file) in the
package, its metadata and every console script's --version; the console scripts batmobile-train, -export, -evaluate,
-committee with --version and --help (skipped where the package is not installed); and, when scripts/test.sh runs the
suite against the installed package (pytest --installed), that the installed package is the one imported."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

import batmobile
from batmobile import cli
from conftest import INSTALLED, REPO

SCRIPTS = {"batmobile-train": "train", "batmobile-export": "export", "batmobile-evaluate": "evaluate",
           "batmobile-committee": "committee"}


def repo_version():
    with open(os.path.join(REPO, "VERSION")) as f:
        return f.read().strip()


def test_version_file_matches_the_package():
    """VERSION (read by CMake for the C++ side) and python/batmobile/_version.py (read by pyproject.toml) agree;
    on a mismatch, set python/batmobile/_version.py to VERSION's number."""
    version = repo_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"VERSION holds {version!r}, not MAJOR.MINOR.PATCH"
    with open(os.path.join(REPO, "python", "batmobile", "_version.py")) as f:
        source = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M).group(1)
    assert source == version, f"python/batmobile/_version.py says {source}, VERSION says {version}"
    assert batmobile.__version__ == version, f"the imported package ({batmobile.__file__}) is version " \
                                             f"{batmobile.__version__}, VERSION says {version}: reinstall it"
    with open(os.path.join(REPO, "python", "pyproject.toml")) as f:
        assert 'version = { attr = "batmobile._version.__version__" }' in f.read()


def test_installed_package_is_the_one_tested():
    if not INSTALLED:
        pytest.skip("the tests import batmobile from python/ (pytest --installed tests the installed one)")
    from importlib.metadata import version
    source_dir = os.path.join(REPO, "python", "batmobile")
    assert os.path.dirname(os.path.abspath(batmobile.__file__)) != source_dir, \
        f"batmobile was imported from {batmobile.__file__}, not from the installed package"
    assert "site-packages" in batmobile.__file__
    assert version("batmobile") == repo_version()


@pytest.mark.parametrize("tool", sorted(SCRIPTS.values()))
def test_version_option_of_each_entry_point(tool, capsys):
    assert getattr(cli, tool)(["--version"]) == 0
    assert capsys.readouterr().out == f"batmobile {repo_version()}\n"


def find_script(name):
    """The console script beside this interpreter (a venv's bin/, even when not activated), else on PATH."""
    beside = os.path.join(sysconfig.get_path("scripts"), name)
    path = beside if os.access(beside, os.X_OK) else shutil.which(name)
    if path is None:
        if INSTALLED:
            pytest.fail(f"{name} is not installed beside {sys.executable} although pytest runs with --installed")
        pytest.skip(f"{name} is not installed (pip install ./python)")
    return path


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_script_version_and_help(name):
    path = find_script(name)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([path, "--version"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and p.stdout == f"batmobile {repo_version()}\n", (p.stdout, p.stderr)
    p = subprocess.run([path, "--help"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert ("usage: " + name) in p.stdout or (name == "batmobile-committee" and "batmobile-committee train" in p.stdout)
