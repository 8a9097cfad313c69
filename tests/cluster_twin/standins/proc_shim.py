"""The twin's view of kernel files this machine's kernel does not have, for Python programs.

This machine's kernel is built without loadable modules, so /proc/modules does not exist, and
no NVIDIA driver, so neither does /proc/driver/nvidia/version. Ansible's modules read both
(community.general.modprobe, the acceptance role's slurp); this file, loaded at every Python
start-up through a .pth file, opens the stand-in kernel's tables in their place. Nothing else
is redirected.
"""

import builtins

_REDIRECT = {
    "/proc/modules": "/run/railplan-twin/proc-modules",
    "/proc/driver/nvidia/version": "/run/railplan-twin/proc-driver-nvidia-version",
}
_open = builtins.open


def _twin_open(file, *args, **kwargs):
    if isinstance(file, (str, bytes)):
        key = file.decode() if isinstance(file, bytes) else file
        file = _REDIRECT.get(key, file)
    return _open(file, *args, **kwargs)


builtins.open = _twin_open
