"""One BMC per server: OpenIPMI's ``ipmi_sim`` on the server's planned BMC address.

Each BMC answers IPMI 2.0 over LAN (RMCP+, what ``ipmitool -I lanplus`` speaks) on UDP 623
of its address, with one operator account whose password the twin also puts in the vault
the playbook reads (``slurm_power_bmc_password``). Its chassis control is `power.py`
(``chassis_control`` in ipmi_lan(5)): ``chassis power on/off/soft/reset`` and ``chassis power
status`` act on the twin host. The emulated MC is the one of ipmi_sim's own examples (a
BMC at IPMB 0x20 with a SEL); the twin reads no sensors.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.cluster_twin.proc import TwinError, run

POWER = Path(__file__).resolve().with_name("power.py")
EMU = """\
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
"""


def lan_conf(name: str, address: str, user: str, password: str, hostdir: Path) -> str:
    chassis = f"{sys.executable} {POWER} chassis {hostdir}"
    auths = "none md2 md5 straight"
    return f"""\
name "{name}"
set_working_mc 0x20
  startlan 1
    addr {address} 623
    priv_limit admin
    allowed_auths_callback {auths}
    allowed_auths_user {auths}
    allowed_auths_operator {auths}
    allowed_auths_admin {auths}
    guid {name.encode().hex()[:32].ljust(32, "0")}
  endlan
  chassis_control "{chassis}"
  user 2 true "{user}" "{password}" operator 10 {auths}
"""


def start(
    name: str, address: str, user: str, password: str, hostdir: Path
) -> subprocess.Popen[bytes]:
    """Start the BMC of host NAME; its files and state live in HOSTDIR/bmc."""
    bmcdir = hostdir / "bmc"
    (bmcdir / "state").mkdir(parents=True, exist_ok=True)
    (bmcdir / "lan.conf").write_text(lan_conf(name, address, user, password, hostdir))
    (bmcdir / "lan.conf").chmod(0o600)
    (bmcdir / "bmc.emu").write_text(EMU)
    log = (bmcdir / "ipmi_sim.log").open("ab")
    proc = subprocess.Popen(
        ["ipmi_sim", "-n", "-c", str(bmcdir / "lan.conf"), "-f", str(bmcdir / "bmc.emu"),
         "-s", str(bmcdir / "state")],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    return proc


def wait_ready(address: str, user: str, password_file: Path, timeout: float = 20) -> None:
    """Wait until the BMC at ADDRESS answers ``chassis power status``."""
    deadline = time.monotonic() + timeout
    while True:
        proc = run(
            ipmitool(address, user, password_file, "chassis", "power", "status"), check=False
        )
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise TwinError(f"twin: BMC {address} does not answer: {proc.stderr.strip()}")
        time.sleep(0.3)


def ipmitool(address: str, user: str, password_file: Path, *args: str) -> list[str]:
    # -C 3 skips the cipher-suite negotiation ipmi_sim does not answer (a slow warning each call)
    return ["ipmitool", "-I", "lanplus", "-C", "3", "-H", address, "-U", user,
            "-f", str(password_file), *args]  # fmt: skip
