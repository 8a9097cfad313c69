"""The `railplan` command line: the only package that prints, reads arguments or exits.

Exit codes everywhere: 0 ok (warnings allowed), 1 the input is understood and fails a check,
2 usage error or unreadable/invalid input, 3 an internal error (a railplan bug). Library code
raises `RailplanError`; this package turns it into one line per problem on stderr and exit 2,
never a traceback (set ``RAILPLAN_DEBUG=1`` to see one for internal errors). `common` holds
the app and what commands share, one module per family of commands registers its commands on
import, and `process` maps outcomes to exit codes.
"""

from __future__ import annotations

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

__all__ = ["app", "main"]

# `railplan --help` lists commands in this order, whatever order the modules import in.
_ORDER = [checks.lint, planning.plan, changes.diff, changes.render, changes.report, verify.verify]
_ORDER += [predictions.predict, training.train, simulation.simulate, trace_gen.trace]
_ORDER += [predictions.budget]
_ORDER += [reference.rules, reference.explain]
_ORDER += [reference.schema, reference.catalog]
app.registered_commands.sort(key=lambda command: _ORDER.index(command.callback))  # type: ignore[arg-type]
