"""Ansible callback: one line per task start and per host result, written as they happen.

The twin runs playbooks with the ``ansible.posix.json`` stdout callback, which prints its
document only when the run ends, so a run stopped by the twin's time limit left nothing to
read (cluster twin run 30: a green-field install killed after 3,600 s, its log empty). This
callback appends to the file named by ``RAILPLAN_TWIN_PROGRESS``, line-buffered, so the log of
a run that is killed still says which task each host was in. It is the twin's, not the
product's: the rendered ``ansible.cfg`` enables no callback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: railplan_twin_progress
type: notification
short_description: the cluster twin's progress lines (task starts, host results)
description:
  - Appends one tab-separated line per task start and per host result to the file named by
    the RAILPLAN_TWIN_PROGRESS environment variable.
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "railplan_twin_progress"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get("RAILPLAN_TWIN_PROGRESS")
        self._out = Path(path).open("a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115

    def _line(self, *fields: str) -> None:
        if self._out is not None:
            stamp = time.strftime("%H:%M:%S")
            self._out.write("\t".join((stamp, *(f.replace("\n", " ") for f in fields))) + "\n")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._line("play", play.get_name())

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._line("task", task.get_name())

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._line("handler", task.get_name())

    def _result(self, status: str, result: Any) -> None:
        self._line(status, result._host.get_name(), result._task.get_name())

    def v2_runner_on_ok(self, result: Any) -> None:
        self._result("ok", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._result("failed", result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._result("unreachable", result)

    def v2_runner_on_async_poll(self, result: Any) -> None:
        self._result("polling", result)
