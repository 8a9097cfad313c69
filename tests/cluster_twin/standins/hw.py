#!/usr/bin/python3
"""The twin's hardware boundary: one program answering as GPU, HCA and kernel-module tools.

Installed in every twin host as /usr/lib/railplan-twin/hw.py and called through symlinks
named after the tool it stands in for (the name it is called by picks the tool). It keeps
the contracts of the real tools where railplan's roles and acceptance checks read them
(output formats, exit codes), and nothing else. Inputs:

- /etc/railplan-twin/hardware.json: the host's hardware, written by the twin from the plan
  (GPUs, NVLink, HCAs with their rates, the bandwidth a healthy node and SU measure);
- /etc/railplan-twin/faults.json: faults a scenario injects (absent: healthy); keys:
  ``gpu_lost`` [index...] (Xid 79, off the bus), ``ecc_uncorrected`` {index: count},
  ``xid`` {index: code}, ``ib_rate_gbps`` {device: rate}, ``ib_state`` {device: state},
  ``dcgm_diag_fail`` [test name...], ``busbw_factor`` (all_reduce_perf), ``ib_bw_factor``;
- what the stand-in driver packages installed, under /usr/lib/railplan-twin/installed/;
- kernel state: /run/railplan-twin/ (volatile: loaded modules, the MIG devices, the host
  engine) and /var/lib/railplan-twin/ (persistent: MIG mode, DKMS builds).

Every call is logged to /var/log/railplan-twin/calls.log (time, tool, arguments), so a
scenario can show the order in which tools ran.
"""

import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

ETC = Path("/etc/railplan-twin")
RUN = Path("/run/railplan-twin")
LIB = Path("/var/lib/railplan-twin")
INSTALLED = Path("/usr/lib/railplan-twin/installed")
LOG = Path("/var/log/railplan-twin/calls.log")
# Modules the stand-in kernel knows, and which component provides each.
PROVIDERS = {
    "nvidia": "nvidia-driver", "nvidia_uvm": "nvidia-driver", "nvidia_modeset": "nvidia-driver",
    "nvidia_peermem": "nvidia-driver", "mlx5_core": "kernel", "mlx5_ib": "kernel",
    "ib_core": "kernel", "ib_uverbs": "kernel", "ib_umad": "kernel", "rdma_ucm": "kernel",
}  # fmt: skip
DEPENDS = {
    "nvidia_peermem": ["nvidia", "ib_core"],
    "nvidia_uvm": ["nvidia"],
    "mlx5_ib": ["ib_core"],
}


# --- state --------------------------------------------------------------------------------


def load(path, default):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return default


def save(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def hardware():
    return load(ETC / "hardware.json", {})


def faults():
    return load(ETC / "faults.json", {})


def installed(component):
    """The installed version of a stand-in component (driver, doca, dcgm, ...), or None."""
    data = load(INSTALLED / (component + ".json"), None)
    return data


def loaded():
    return load(RUN / "modules.json", [])


def save_loaded(mods):
    """The module table, as JSON and in /proc/modules' format (proc_shim.py serves it to
    Python programs that read /proc/modules: this kernel has no module support at all)."""
    save(RUN / "modules.json", mods)
    users = {m: [h for h in mods if m in DEPENDS.get(h, [])] for m in mods}
    lines = [
        f"{m} 16384 {len(users[m])} {','.join(users[m]) or '-'}, Live 0x0000000000000000"
        for m in mods
    ]
    (RUN / "proc-modules").write_text("".join(line + "\n" for line in lines))


def log_call(tool, args):
    try:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with LOG.open("a") as out:
            out.write(f"{time.time():.3f} {tool} {' '.join(args)}\n")
    except OSError:
        pass


def fail(message, code=1):
    print(message, file=sys.stderr)
    return code


# --- kernel modules -------------------------------------------------------------------------


def module_name(name):
    return name.replace("-", "_")


def peermem_build():
    """How nvidia-peermem was built (DKMS, with the driver): against MLNX_OFED's peer-memory
    API (``mofed``) or without it (``stub``), and for which driver version."""
    return load(LIB / "dkms.json", {}).get("nvidia_peermem")


def modprobe(args):
    remove = "-r" in args or "--remove" in args
    names = [module_name(a) for a in args if not a.startswith("-")]
    if not names:
        return fail("modprobe: ERROR: missing module name", 1)
    mods = loaded()
    for name in names:
        if remove:
            holders = [m for m in mods if name in DEPENDS.get(m, [])]
            if holders:
                return fail(f"modprobe: FATAL: Module {name} is in use.", 1)
            mods = [m for m in mods if m != name]
            continue
        error = load_error(name)
        if error:
            return fail(f"modprobe: ERROR: could not insert '{name}': {error}", 1)
        for dep in [*DEPENDS.get(name, []), name]:
            if dep not in mods:
                mods.append(dep)
    save_loaded(mods)
    return 0


def load_error(name):
    """Why the stand-in kernel would refuse to load NAME, or None."""
    provider = PROVIDERS.get(name)
    if provider is None:
        return "Unknown symbol in module, or unknown parameter (see dmesg)"
    if provider == "nvidia-driver" and installed("nvidia-driver") is None:
        return "No such device"
    if name == "nvidia_peermem":
        build = peermem_build()
        if not build or build.get("against") != "mofed":
            # NVIDIA's docs: built without MLNX_OFED, nvidia-peermem has no peer-memory API
            return "Invalid argument (nvidia-peermem was built without MLNX_OFED/DOCA)"
        if ib_stack() != "mofed":
            # built against MLNX_OFED's ib_core, but the inbox ib_core is the one loaded
            return "Unknown symbol in module (ib_core is the inbox one: restart openibd or reboot)"
    return None


def ib_stack():
    """Whose ib_core/mlx5 modules are loaded: ``mofed`` once DOCA/MLNX_OFED is installed and
    openibd has (re)loaded them or the host has booted with them, else ``inbox``."""
    return load(RUN / "ib-stack.json", {}).get("flavour", "inbox")


def openibd_reload():
    """What openibd's restart does to the modules: MLNX_OFED's replace the loaded ones."""
    save(RUN / "ib-stack.json", {"flavour": "mofed" if installed("doca") is not None else "inbox"})
    return 0


def lsmod(args):
    print("Module                  Size  Used by")
    for name in loaded():
        print(f"{name:<24}{16384:>6}  0")
    return 0


def rmmod(args):
    return modprobe(["-r", *args])


def modinfo(args):
    names = [module_name(a) for a in args if not a.startswith("-")]
    if not names or names[0] not in PROVIDERS:
        return fail(f"modinfo: ERROR: Module {names[0] if names else ''} not found.", 1)
    name = names[0]
    print(f"filename:       /lib/modules/{os.uname().release}/updates/dkms/{name}.ko")
    if name == "nvidia_peermem":
        build = peermem_build() or {}
        version = build.get("driver", "unknown")
        print(f"version:        {version}")
        print("description:    NVIDIA GPU memory plug-in")
        print(
            "depends:        " + ("nvidia,ib_core" if build.get("against") == "mofed" else "nvidia")
        )
        print(f"railplan-twin:  built against {build.get('against', 'nothing (not built)')}")
    else:
        print("depends:        " + ",".join(DEPENDS.get(name, [])))
    return 0


def dkms(args):
    """``dkms autoinstall`` / ``dkms status``: rebuild the driver's modules for this kernel."""
    if args[:1] == ["autoinstall"] or args[:1] == ["install"]:
        build_peermem()
        return 0
    if args[:1] == ["status"]:
        build = peermem_build()
        if build:
            print(f"nvidia/{build['driver']}, {os.uname().release}, x86_64: installed")
        return 0
    return fail(f"dkms: unsupported in the twin: {' '.join(args)}", 2)


def build_peermem():
    """What the driver package's DKMS build does for nvidia-peermem: link against the
    RDMA stack's peer-memory API when MLNX_OFED/DOCA is installed, else build a stub."""
    driver = installed("nvidia-driver")
    if driver is None:
        return
    against = "mofed" if installed("doca") is not None else "inbox"
    data = load(LIB / "dkms.json", {})
    data["nvidia_peermem"] = {"driver": driver["version"], "against": against}
    save(LIB / "dkms.json", data)


def update_initramfs(args):
    Path("/boot").mkdir(exist_ok=True)
    (Path("/boot") / f"initrd.img-{os.uname().release}").write_text("railplan-twin initramfs\n")
    return 0


def update_grub(args):
    """Write the command line the next boot will use, from /etc/default/grub(.d)."""
    values = {"GRUB_CMDLINE_LINUX_DEFAULT": "", "GRUB_CMDLINE_LINUX": ""}
    sources = [Path("/etc/default/grub"), *sorted(Path("/etc/default/grub.d").glob("*.cfg"))]
    for source in sources:
        if source.is_file():
            values.update(shell_assignments(source.read_text(), values))
    line = " ".join(
        f"{values['GRUB_CMDLINE_LINUX_DEFAULT']} {values['GRUB_CMDLINE_LINUX']}".split()
    )
    target = Path("/boot/railplan-twin/cmdline")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"BOOT_IMAGE=/vmlinuz-{os.uname().release} root=/dev/twin ro {line}\n")
    print("Generating grub configuration file ...\ndone")
    return 0


def shell_assignments(text, known):
    """NAME="value" lines of a shell file, with $NAME expanded from earlier ones."""
    values = dict(known)
    for raw in text.splitlines():
        line = raw.strip()
        name, sep, value = line.partition("=")
        if not sep or name not in values:
            continue
        value = value.strip().strip('"').strip("'")
        for other, known_value in values.items():
            value = value.replace("${" + other + "}", known_value).replace("$" + other, known_value)
        values[name] = value
    return values


# --- GPUs -------------------------------------------------------------------------------


def gpus():
    gpu = hardware().get("gpu", {})
    return [
        {"index": i, "name": gpu.get("name", "NVIDIA GPU"), "pci": f"00000000:{0x07 + 0x10 * i:02X}:00.0",
         "uuid": f"GPU-{hardware().get('host', 'twin')[:8].encode().hex():0<8}-0000-0000-0000-{i:012d}",
         "memory_mib": gpu.get("memory_mib", 81920)}
        for i in range(int(gpu.get("count", 0)))
    ]  # fmt: skip


NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"


def driver_error():
    """nvidia-smi's refusal when the driver is missing, not loaded or mismatched."""
    driver = installed("nvidia-driver")
    if driver is None or "nvidia" not in loaded():
        return NO_DRIVER, 9
    booted = load(RUN / "nvidia-loaded.json", {})
    if booted.get("version") != driver["version"]:
        return f"{MISMATCH}\nNVML library version: {driver['version']}", 18
    return None


def nvidia_smi(args):
    error = driver_error()
    if error:
        print(error[0])
        return error[1]
    if args[:1] == ["nvlink"]:
        return nvlink_status()
    if "-L" in args:
        return list_gpus()
    query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    if query is not None:
        return query_gpus(query.split(","), "noheader" in " ".join(args))
    print(f"NVIDIA-SMI {installed('nvidia-driver')['version']}  (railplan twin stand-in)")
    for gpu in gpus():
        print(f"|  {gpu['index']}  {gpu['name']}  {gpu['pci']}  |")
    return 0


def lost(index):
    return index in [int(i) for i in faults().get("gpu_lost", [])]


def query_gpus(fields, noheader):
    values = {
        "index": lambda g: str(g["index"]), "name": lambda g: g["name"],
        "pci.bus_id": lambda g: g["pci"], "uuid": lambda g: g["uuid"],
        "driver_version": lambda g: installed("nvidia-driver")["version"],
        "memory.total": lambda g: f"{g['memory_mib']} MiB",
        "mig.mode.current": lambda g: "Enabled" if mig_mode(g["index"]) else "Disabled",
        "ecc.errors.uncorrected.volatile.total":
            lambda g: str(int(faults().get("ecc_uncorrected", {}).get(str(g["index"]), 0))),
        "retired_pages.pending": lambda g: "No",
        "remapped_rows.pending":
            lambda g: "Yes" if str(g["index"]) in faults().get("ecc_uncorrected", {}) else "No",
    }  # fmt: skip
    for field in fields:
        if field not in values:
            print(f'Field "{field}" is not a valid field to query.')
            return 2
    if not noheader:
        print(", ".join(fields))
    for gpu in gpus():
        if lost(gpu["index"]):
            print(
                f"Unable to determine the device handle for GPU{gpu['index']}: {gpu['pci']}: "
                "GPU is lost.  Reboot the system to recover this GPU",
                file=sys.stderr,
            )
            return 15
        print(", ".join(values[f](gpu) for f in fields))
    return 0


def list_gpus():
    for gpu in gpus():
        print(f"GPU {gpu['index']}: {gpu['name']} (UUID: {gpu['uuid']})")
        for n, device in enumerate(load(RUN / "mig.json", {}).get(str(gpu["index"]), [])):
            print(f"  MIG {device}     Device  {n}: (UUID: MIG-{gpu['uuid'][4:]}-{n})")
    return 0


def nvlink_status():
    gpu = hardware().get("gpu", {})
    links = int(gpu.get("nvlinks", 0))
    for g in gpus():
        print(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
        for link in range(links):
            rate = "<inactive>" if lost(g["index"]) else f"{gpu.get('nvlink_GBps', 25)} GB/s"
            print(f"\t Link {link}: {rate}")
    return 0


def mig_mode(index):
    return bool(load(LIB / "mig-mode.json", {}).get(str(index)))


def mig_parted(args):
    """``nvidia-mig-parted apply|assert|export -f FILE -c CONFIG`` on the stand-in GPUs."""
    error = driver_error()
    if error:
        print(error[0], file=sys.stderr)
        return 1
    verb = args[0] if args else ""
    path = option(args, "-f", "--config-file")
    name = option(args, "-c", "--selected-config")
    if verb == "export":
        print(json.dumps({"version": "v1", "mig-configs": {"current": current_layout()}}))
        return 0
    wanted = layout_from_file(path, name)
    if wanted is None:
        return fail(f"Error: config {name!r} not found in {path}", 1)
    if verb == "assert":
        return (
            0
            if current_layout() == wanted
            else fail("Assertion failure: selected configuration not currently applied", 1)
        )
    if verb == "apply":
        modes = {str(g["index"]): bool(wanted.get(str(g["index"]))) for g in gpus()}
        save(LIB / "mig-mode.json", modes)
        save(RUN / "mig.json", wanted)
        return 0
    return fail(f"nvidia-mig-parted: unsupported in the twin: {' '.join(args)}", 2)


def option(args, short, long):
    for i, arg in enumerate(args):
        if arg in (short, long) and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(long + "="):
            return arg.split("=", 1)[1]
    return None


def current_layout():
    return load(RUN / "mig.json", {})


def layout_from_file(path, name):
    """{gpu index: [profile, ...]} of config NAME in a mig-parted file (JSON or simple YAML)."""
    if not path or not Path(path).is_file():
        return None
    import yaml  # python3-yaml: Ansible's own dependency on the host

    config = (yaml.safe_load(Path(path).read_text()) or {}).get("mig-configs", {}).get(name)
    if config is None:
        return None
    layout = {}
    for entry in config:
        devices = entry.get("devices", "all")
        indexes = [g["index"] for g in gpus()] if devices == "all" else [int(d) for d in devices]
        profiles = []
        if entry.get("mig-enabled"):
            for profile, count in sorted((entry.get("mig-devices") or {}).items()):
                profiles += [profile] * int(count)
        for index in indexes:
            layout[str(index)] = profiles
    return {k: v for k, v in layout.items() if v}


# --- DCGM -------------------------------------------------------------------------------


def hostengine_running():
    try:
        pid = int((RUN / "nv-hostengine.pid").read_text())
        os.kill(pid, 0)
        return True
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False


def nv_hostengine(args):
    if "--term" in args or "-t" in args:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int((RUN / "nv-hostengine.pid").read_text()), signal.SIGTERM)
        (RUN / "nv-hostengine.pid").unlink(missing_ok=True)
        return 0
    if driver_error():
        return fail("Err: Failed to start DCGM Server: NVML error", 255)
    if "-n" not in args and os.fork() > 0:  # daemonizes, as the real one does without -n
        time.sleep(0.2)
        return 0
    RUN.mkdir(parents=True, exist_ok=True)
    (RUN / "nv-hostengine.pid").write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def dcgmi(args):
    if not hostengine_running():
        print("Error: unable to establish a connection to the specified host: localhost")
        return 255
    if args[:1] == ["discovery"]:
        print(f"{len(gpus())} GPUs found.")
        for gpu in gpus():
            print(f"| {gpu['index']} | Name: {gpu['name']} | PCI Bus ID: {gpu['pci']} |")
        return 0
    if args[:1] == ["diag"]:
        return dcgm_diag(option(args, "-r", "--run") or "1")
    if args[:1] == ["health"]:
        print("Overall Health: Healthy" if not faults() else "Overall Health: Failure")
        return 0
    return fail(f"dcgmi: unsupported in the twin: {' '.join(args)}", 2)


def dcgm_diag(level):
    failing = set(faults().get("dcgm_diag_fail", []))
    tests = ["Deployment", "Memory", "PCIe", "Targeted Stress", "Targeted Power"][
        : 1 + 2 * int(level)
    ]
    time.sleep(float(hardware().get("dcgm_diag_s", {}).get(level, 1)))
    print("+---------------------------+------------------------------------------------+")
    print("| Diagnostic                | Result                                         |")
    for test in tests:
        result = "Fail" if test in failing or any(lost(g["index"]) for g in gpus()) else "Pass"
        print(f"| {test:<25} | {result:<46} |")
    print("+---------------------------+------------------------------------------------+")
    return 226 if failing else 0


# --- InfiniBand ---------------------------------------------------------------------------


def hcas():
    return hardware().get("hcas", [])


def hca_state(hca):
    state = faults().get("ib_state", {}).get(hca["name"])
    if state:
        return state
    if installed("doca") is None and "mlx5_core" not in loaded():
        return "Down"
    return "Active"


def hca_rate(hca):
    return int(faults().get("ib_rate_gbps", {}).get(hca["name"], hca["rate_gbps"]))


def ibstat(args):
    wanted = [a for a in args if not a.startswith("-")]
    found = [h for h in hcas() if not wanted or h["name"] == wanted[0]]
    if wanted and not found:
        return fail(
            f"ibpanic: [{os.getpid()}] main: stat of IB device '{wanted[0]}' failed: No such file or directory",
            255,
        )
    for hca in found:
        state = hca_state(hca)
        print(f"CA '{hca['name']}'\n\tCA type: MT4123\n\tNumber of ports: 1")
        print(f"\tFirmware version: 20.39.1002\n\tNode GUID: {hca['guid']}")
        print("\tPort 1:")
        print(
            f"\t\tState: {state}\n\t\tPhysical state: {'LinkUp' if state == 'Active' else 'Polling'}"
        )
        print(f"\t\tRate: {hca_rate(hca) if state == 'Active' else 10}\n\t\tBase lid: {hca['lid']}")
        print(
            f"\t\tPort GUID: {hca['guid']}\n\t\tLink layer: {hca.get('link_layer', 'InfiniBand')}"
        )
    return 0


def ibv_devinfo(args):
    for hca in hcas():
        state = "PORT_ACTIVE (4)" if hca_state(hca) == "Active" else "PORT_DOWN (1)"
        print(
            f"hca_id:\t{hca['name']}\n\ttransport:\t\t\tInfiniBand (0)\n\tnode_guid:\t\t\t{hca['guid']}"
        )
        print(f"\t\tport:\t1\n\t\t\tstate:\t\t\t{state}\n\t\t\tlink_layer:\t\tInfiniBand\n")
    return 0


def ibnetdiscover(args):
    dump = ETC / "ibnetdiscover-p.txt"
    if not dump.is_file():
        return fail("ibnetdiscover: iberror: failed: discover failed", 255)
    sys.stdout.write(dump.read_text())
    return 0


def ib_write_bw(args):
    """perftest's ib_write_bw: a server (no host argument) waits on TCP port -p for one
    client, the client connects to HOST:port over the management network (perftest's own
    out-of-band exchange) and both print the result table; the rate is the slower end's."""
    device = option(args, "-d", "--ib-dev") or (hcas()[0]["name"] if hcas() else "mlx5_0")
    port = int(option(args, "-p", "--port") or 18515)
    values = {"-d", "--ib-dev", "-p", "--port", "-D", "-s", "-n", "-x", "-q"}
    positional = [
        a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] not in values
    ]
    hca = next((h for h in hcas() if h["name"] == device), None)
    if hca is None:
        return fail(f" Couldn't find device {device}", 1)
    if hca_state(hca) != "Active":
        return fail(f" Unable to init the socket connection: port of {device} is not active", 1)
    mine = hca_rate(hca) * float(faults().get("ib_bw_factor", 1.0))
    if positional:
        return ib_bw_client(positional[0], port, device, mine)
    return ib_bw_server(port, device, mine)


def ib_bw_server(port, device, mine):
    with socket.create_server(("0.0.0.0", port), reuse_port=True) as server:
        server.settimeout(600)
        conn, _ = server.accept()
        with conn:
            theirs = float(conn.recv(64).decode() or 0)
            conn.sendall(f"{mine}".encode())
    print_bw(device, min(mine, theirs))
    return 0


def ib_bw_client(host, port, device, mine):
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(f"{mine}".encode())
            theirs = float(conn.recv(64).decode() or 0)
    except OSError as err:
        print(f"Couldn't connect to {host}:{port}", file=sys.stderr)
        print(f" Unable to open file descriptor for socket connection ({err})", file=sys.stderr)
        return 1
    time.sleep(float(hardware().get("ib_bw_s", 1)))
    print_bw(device, min(mine, theirs))
    return 0


def print_bw(device, rate):
    average = round(rate * 0.97, 2)  # payload over a healthy link: ~97 % of the signalling rate
    print("---------------------------------------------------------------------------------------")
    print(f"                    RDMA_Write BW Test\n Device         : {device}")
    print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
    print(
        f" 65536      5000           {average + 0.3:.2f}             {average:.2f}               {average / 0.524:.6f}"
    )
    print("---------------------------------------------------------------------------------------")


# --- NCCL -------------------------------------------------------------------------------


def all_reduce_perf(args):
    """nccl-tests' all_reduce_perf: the size row and "Avg bus bandwidth" of a healthy node
    or SU (hardware.json), scaled by busbw_factor; under mpirun only rank 0 prints."""
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    if rank != 0:
        return 0
    error = driver_error()
    if error:
        return fail(f"NCCL failure: {error[0]}", 1)
    nccl = hardware().get("nccl", {})
    busbw = nccl.get("su_busbw_GBps" if ranks > 1 else "node_busbw_GBps", 0.0)
    busbw = busbw * float(faults().get("busbw_factor", 1.0))
    size = option(args, "-b", "--minbytes") or "1G"
    gpus_n = ranks * (1 if ranks > 1 else int(option(args, "-g", "--ngpus") or 1))
    print(
        f"# nThread 1 nGpus {option(args, '-g', '--ngpus') or 1} minBytes {size} (railplan twin stand-in)"
    )
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong")
    algbw = busbw / (2 * (gpus_n - 1) / gpus_n) if gpus_n > 1 else busbw
    print(
        f"  {size:>12}  {0:>12}     float     sum      -1   {0:>6.1f}  {algbw:6.2f}  {busbw:6.2f}      0"
    )
    print("# Out of bounds values : 0 OK")
    print(f"# Avg bus bandwidth    : {busbw:.2f}")
    return 0


# --- services the driver packages bring --------------------------------------------------


def daemon(args):
    """nvidia-persistenced, nv-fabricmanager, sharp_am, opensm: run in the foreground until stopped
    (their units are Type=simple here); fail as the real one does without a driver."""
    if driver_error() and TOOL in ("nvidia-persistenced", "nv-fabricmanager"):
        return fail(f"{TOOL}: failed to open the NVIDIA driver", 1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def boot(args):
    """At every boot (railplan-twin-kernel.service): what the kernel and udev do before
    userspace: load the modules the hardware needs and the ones modules-load.d asks for."""
    RUN.mkdir(parents=True, exist_ok=True)
    save_loaded([])
    openibd_reload()  # at boot the installed stack's modules load
    driver = installed("nvidia-driver")
    wanted = ["mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad"]
    if driver is not None:
        wanted += ["nvidia", "nvidia_uvm", "nvidia_modeset"]
        save(RUN / "nvidia-loaded.json", {"version": driver["version"]})
        flavour = "Open Kernel Module" if driver.get("flavour") == "open" else "Kernel Module"
        (RUN / "proc-driver-nvidia-version").write_text(
            f"NVRM version: NVIDIA UNIX x86_64 {flavour}  {driver['version']}  (railplan twin)\n"
            "GCC version:  gcc version 12.3.0\n"
        )
    for conf in sorted(Path("/etc/modules-load.d").glob("*.conf")):
        for line in conf.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith(("#", ";")):
                wanted.append(module_name(line.strip()))
    for name in wanted:
        modprobe([name])  # a module that does not load is skipped, as systemd-modules-load does
    if "nvidia" in loaded():
        make_device_files()
    return 0


def make_device_files():
    """The device files the loaded driver gives (nvidia-modprobe/udev): /dev/nvidia<N> per GPU
    and /dev/nvidiactl on character major 195, /dev/nvidia-uvm on a dynamic major."""
    nodes = [(f"/dev/nvidia{g['index']}", 195, g["index"]) for g in gpus()]
    nodes += [("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 508, 0)]
    for path, major, minor in nodes:
        if not Path(path).exists():
            os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))


TOOLS = {
    "nvidia-smi": nvidia_smi, "nvidia-mig-parted": mig_parted, "dcgmi": dcgmi,
    "nv-hostengine": nv_hostengine, "ibstat": ibstat, "ibv_devinfo": ibv_devinfo,
    "ibnetdiscover": ibnetdiscover, "ib_write_bw": ib_write_bw, "all_reduce_perf": all_reduce_perf,
    "modprobe": modprobe, "rmmod": rmmod, "lsmod": lsmod, "modinfo": modinfo, "dkms": dkms,
    "update-initramfs": update_initramfs, "update-grub": update_grub,
    "nvidia-persistenced": daemon, "nv-fabricmanager": daemon, "sharp_am": daemon, "dcgm-exporter": daemon, "opensm": daemon,
    "railplan-twin-boot": boot, "railplan-twin-build-peermem": lambda a: build_peermem() or 0,
    "railplan-twin-openibd-reload": lambda a: openibd_reload(),
}  # fmt: skip
TOOL = Path(sys.argv[0]).name

if __name__ == "__main__":
    log_call(TOOL, sys.argv[1:])
    if TOOL not in TOOLS:
        sys.exit(fail(f"railplan twin: no stand-in named {TOOL}", 127))
    sys.exit(TOOLS[TOOL](sys.argv[1:]))
