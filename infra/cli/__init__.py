"""The `railplan` command line: the only package that prints, reads arguments or exits.

Exit codes everywhere: 0 ok (warnings allowed), 1 the input is understood and fails a check,
2 usage error or unreadable/invalid input, 3 an internal error (a railplan bug). Library code
raises `RailplanError`; this package turns it into one line per problem on stderr and exit 2,
never a traceback (set ``RAILPLAN_DEBUG=1`` to see one for internal errors). `common` holds
the app and what commands share, one module per family of commands registers its commands on
import, and `process` maps outcomes to exit codes.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType


def _end_while_importing(signum: int, frame: FrameType | None) -> None:
    """A signal during the imports below: nothing to clean up yet, so railplan's line and out.

    Before `main` installs its handlers, SIGINT raised KeyboardInterrupt in the middle of an
    import (a traceback) and SIGTERM ended the process without the line.
    """
    os.write(2, f"railplan: interrupted by {signal.Signals(signum).name}\n".encode())
    if signum == signal.SIGINT:
        os._exit(130)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached: the default action ends the process


_CATCHABLE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_BEFORE = {}
if threading.current_thread() is threading.main_thread():
    for _signum in _CATCHABLE:
        if signal.getsignal(_signum) not in (signal.SIG_IGN, None):  # nohup's SIGHUP stays off
            _BEFORE[_signum] = signal.signal(_signum, _end_while_importing)

# after the handlers, so no signal interrupts the imports raw
from infra.cli import (
    changes,
    checks,
    planning,
    predictions,
    reference,
    simulation,
    trace_gen,
    training,
    verify,
)
from infra.cli.common import app
from infra.cli.process import main

for _signum, _handler in _BEFORE.items():
    signal.signal(_signum, _handler)

__all__ = ["app", "main"]

# `railplan --help` lists commands in this order, whatever order the modules import in.
_ORDER = [checks.lint, planning.plan, changes.diff, changes.render, changes.report, verify.verify]
_ORDER += [predictions.predict, training.train, simulation.simulate, trace_gen.trace]
_ORDER += [predictions.budget]
_ORDER += [reference.rules, reference.explain]
_ORDER += [reference.schema, reference.catalog]
app.registered_commands.sort(key=lambda command: _ORDER.index(command.callback))  # type: ignore[arg-type]
