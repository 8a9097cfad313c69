"""What a rendered tree needs from its operator: the secrets, where each comes from, and how.

Two tables the runbook (`infra.render.runbook`) reads. `VAULT_SECRETS`: every variable a static
role reads that must come from Ansible Vault (the role has no default for it and uses it in a
``no_log`` task), with the role that reads it, when the spec needs it, where the value comes
from and the shell lines that create and encrypt it; `SITE_VALUES` the plain values those roles
need beside them. `PULUMI_CONFIG`: the Pulumi stack config keys of ``Pulumi.yaml``, secret or
not, per target. Tests hold both tables to the roles and to ``Pulumi.yaml``, so a new secret
cannot be missing from the runbook. Nothing here is a secret: only names and commands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.spec import Spec

__all__ = ["PULUMI_CONFIG", "SITE_VALUES", "VAULT_SECRETS", "PulumiKey", "VaultSecret"]


@dataclass(frozen=True)
class VaultSecret:
    """One Ansible Vault variable: who reads it, what it is, and how to make it.

    ``commands`` are shell lines with ``{vault}`` for the vault file's path; ``needed`` says
    whether the spec makes the role use it (the runbook still names it when not).
    """

    name: str
    role: str
    what: str
    source: str
    commands: tuple[str, ...]
    needed: Callable[[Spec], bool]
    when: str


@dataclass(frozen=True)
class PulumiKey:
    """One Pulumi stack config key (``Pulumi.yaml``): for which target, secret or not."""

    key: str
    target: str
    secret: bool
    required: bool
    what: str
    example: str


def _power_saving(spec: Spec) -> bool:
    return spec.scheduler.power_saving is not None


VAULT_SECRETS = (
    VaultSecret(
        name="slurm_munge_key",
        role="slurm",
        what="the cluster's munge key, base64 (munge signs every Slurm message)",
        source="generated once for this cluster; every node and the controller share it, so "
        "keep the vault file (regenerating it means restarting munge everywhere)",
        commands=(
            "dd if=/dev/urandom bs=1 count=1024 2>/dev/null | base64 -w0 \\",
            "  | ansible-vault encrypt_string --ask-vault-pass --stdin-name slurm_munge_key \\",
            "  >> {vault}",
        ),
        needed=lambda spec: spec.scheduler.kind == "slurm",
        when="Slurm",
    ),
    VaultSecret(
        name="slurm_power_bmc_password",
        role="slurm",
        what="the password of the BMC account power saving logs in as (IPMI 2.0: at most 20 bytes)",
        source="your BMC account management: one operator-level account on every BMC",
        commands=(
            "read -rsp 'BMC password: ' BMC_PASSWORD && echo",
            "printf '%s' \"$BMC_PASSWORD\" \\",
            "  | ansible-vault encrypt_string --ask-vault-pass \\",
            "    --stdin-name slurm_power_bmc_password \\",
            "  >> {vault}",
            "unset BMC_PASSWORD",
        ),
        needed=_power_saving,
        when="Slurm power saving (`scheduler.power_saving`)",
    ),
)

SITE_VALUES = (
    # (variable, what, needed) -- plain values the roles need beside the secrets
    ("slurm_power_bmc_user", "the BMC account's user name (not secret)", _power_saving),
)

PULUMI_CONFIG = (
    PulumiKey("railplan:spec", "any", False, True, "path of this spec", "path/to/spec.yaml"),
    PulumiKey("railplan:target", "any", False, True, "what to provision", "kubernetes"),
    PulumiKey(
        "railplan:ngcApiKey",
        "kubernetes",
        True,
        False,
        "NGC API key for nvcr.io image pulls (from your NGC account; optional)",
        "",
    ),
    PulumiKey(
        "railplan:availabilityZone", "aws", False, True, "zone of the instances", "us-east-1a"
    ),
    PulumiKey("railplan:amiId", "aws", False, True, "AMI of the GPU instances", "ami-..."),
    PulumiKey("railplan:keyName", "aws", False, False, "EC2 key pair for SSH", "my-key"),
    PulumiKey(
        "railplan:bastionCidrs",
        "aws",
        False,
        False,
        "CIDRs allowed to SSH to a bastion (never 0.0.0.0/0)",
        "203.0.113.7/32",
    ),
)
