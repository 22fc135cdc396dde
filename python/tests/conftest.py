"""What the tests of the kplace package share: the `kplace` command the package installed
(its console script, beside this interpreter), and the repository the tests run in."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every command the tests run ends within this many seconds, or fails the test.
TIMEOUT_S = 300


@pytest.fixture(scope="session")
def kplace_cmd():
    """The `kplace` console script of the environment the package is installed in."""
    script = Path(sys.executable).parent / "kplace"
    assert script.is_file(), f"no kplace console script beside {sys.executable}"
    return str(script)


@pytest.fixture(scope="session")
def run(kplace_cmd):
    """Runs `kplace ARGS...` from the repository root, failing the test with its output on a
    non-zero exit; returns its stdout."""

    def run(*args):
        done = subprocess.run(
            [kplace_cmd, *map(str, args)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ},
        )
        assert done.returncode == 0, f"kplace {' '.join(map(str, args))}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    return run


@pytest.fixture(autouse=True)
def in_root(monkeypatch):
    """Graphs and placements by name, from the repository, as a user there finds them."""
    monkeypatch.chdir(ROOT)
