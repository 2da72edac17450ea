"""``ksched.__version__`` and ``ksched --version``: looked up only when asked for."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

import pytest

import ksched
from ksched.cli.main import main


def _installed() -> str:
    try:
        return version("ksched")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def test_version_is_the_package_metadata_and_other_attributes_are_missing() -> None:
    assert ksched.__version__ == _installed()
    with pytest.raises(AttributeError, match="no_such_thing"):
        ksched.no_such_thing  # noqa: B018


def test_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"ksched {_installed()}\n"


def test_starting_the_cli_does_not_read_package_metadata() -> None:
    code = "import sys, ksched.cli.main; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
