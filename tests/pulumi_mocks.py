"""Pulumi's mock runtime for tests: no Pulumi CLI, engine or cloud exists on this machine.

`RecordingMocks` answers every resource registration with its inputs (as Pulumi's documented
unit-test pattern does) and records it, so a test can count and inspect what a program
declared. `run_program` runs the project's real ``__main__.py`` under these mocks with the
given stack config, the way ``pulumi up`` would run it. Mock gotchas: inputs arrive camelCase
(as the Kubernetes API spells them), integers come back as floats, and a Helm release only
echoes its inputs (no chart is rendered).
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Declared:
    """One resource the program registered."""

    typ: str
    name: str
    inputs: dict[str, Any]


@dataclass
class RecordingMocks(pulumi.runtime.Mocks):
    """Echo inputs as outputs (plus fake computed values) and record every resource."""

    resources: list[Declared] = field(default_factory=list)
    ips: int = 0

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(Declared(args.typ, args.name, dict(args.inputs)))
        outputs = dict(args.inputs)
        if args.typ == "aws:ec2/instance:Instance":
            self.ips += 1  # documentation-range style private addresses, one per instance
            outputs["privateIp"] = f"10.0.{self.ips // 250}.{self.ips % 250 + 4}"
        if args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            outputs.update(dnsName=f"{args.name}.fsx.example", mountName="abcdef01")
        return f"{args.name}_id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}

    def of_type(self, typ: str) -> list[Declared]:
        """The resources of one type token."""
        return [r for r in self.resources if r.typ == typ]


def run_program(config: dict[str, str], secrets: tuple[str, ...] = ()) -> RecordingMocks:
    """Run the project's ``__main__.py`` under mocks with stack ``config``; record resources."""
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="railplan", stack="test", preview=False)
    pulumi.runtime.set_all_config(config, secret_keys=list(secrets))

    @pulumi.runtime.test  # type: ignore[misc]
    def run() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__pulumi__")

    run()
    return mocks
