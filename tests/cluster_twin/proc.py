"""Child processes and the twin's one error type."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


class TwinError(Exception):
    """A failure worth one clear line; `code` is the exit status (2: cannot run here)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def run(
    argv: Sequence[str], *, check: bool = True, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ARGV to completion, capturing its output; a failure raises with its stderr."""
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, input=input, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise TwinError(
            f"twin: `{' '.join(argv)}` failed (rc={proc.returncode}): {' / '.join(err)}"
        )
    return proc


def tool(name: str) -> str | None:
    """A command beside this Python (the venv's ansible-playbook, railplan) or on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)
