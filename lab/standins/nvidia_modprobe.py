#!/usr/bin/python3
"""Lab stand-in for nvidia-modprobe: makes the NVIDIA device nodes, only when asked.

Installed by the lab's stand-in ``nvidia-modprobe`` package. The real tool is
setuid root; the driver's user-space library runs it on first use to load a
module (nvidia, nvidia-uvm, nvidia-modeset) and to make its device node. No
node appears on its own at boot: loading ``nvidia.ko`` makes none, and
``nvidia-uvm`` gets a major number chosen when it loads. So a host where
nobody ran nvidia-modprobe as root has no ``/dev/nvidia-uvm``, and a unit
under ``NoNewPrivileges`` cannot run it (the setuid bit is ignored there).

The forms modelled are the real tool's:
``-c N`` (``--create-nvidia-device-file=N``) makes ``/dev/nvidiaN`` and
``/dev/nvidiactl``; ``-u`` (``--unified-memory``) with ``-c N`` makes
``/dev/nvidia-uvm`` and ``/dev/nvidia-uvm-tools``; ``-m`` (``--modeset``)
makes ``/dev/nvidia-modeset``. Like the real tool it fails when the NVIDIA
module cannot be loaded (here: the stand-in module is not "loaded", see the
lab image's lab-standin-boot) and when it is not run as root.
"""
import os
import stat
import sys

PROC_VERSION = os.environ.get("LAB_NVIDIA_PROC_VERSION", "/proc/driver/nvidia/version")
DEV = os.environ.get("LAB_NVIDIA_DEV", "/dev")
NVIDIA_MAJOR = 195          # fixed, as the real driver's
UVM_MAJOR = 510             # the real one is dynamic: whatever the kernel gives nvidia-uvm when it loads


def parse(argv):
    minors, uvm, modeset = [], False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-u", "--unified-memory"):
            uvm = True
        elif a in ("-m", "--modeset"):
            modeset = True
        elif a in ("-c", "--create-nvidia-device-file"):
            i += 1
            minors.append(int(argv[i]))
        elif a.startswith("--create-nvidia-device-file="):
            minors.append(int(a.split("=", 1)[1]))
        elif a.startswith("-c") and a[2:].lstrip("=").isdigit():
            minors.append(int(a[2:].lstrip("=")))
        else:
            print(f"nvidia-modprobe (lab stand-in): unknown option {a}", file=sys.stderr)
            sys.exit(2)
        i += 1
    return minors, uvm, modeset


def mknod(name, major, minor):
    path = os.path.join(DEV, name)
    try:
        st = os.stat(path)
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == major and os.minor(st.st_rdev) == minor:
            return
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, 0o666)


def main(argv):
    minors, uvm, modeset = parse(argv)
    if not os.path.exists(PROC_VERSION):
        print("nvidia-modprobe (lab stand-in): the NVIDIA kernel module is not loaded", file=sys.stderr)
        return 1
    if os.geteuid() != 0:
        print("nvidia-modprobe (lab stand-in): needs root (the real tool is setuid root, which "
              "NoNewPrivileges disables)", file=sys.stderr)
        return 1
    try:
        for minor in minors:
            if uvm:
                mknod("nvidia-uvm", UVM_MAJOR, 0)
                mknod("nvidia-uvm-tools", UVM_MAJOR, 1)
            else:
                mknod(f"nvidia{minor}", NVIDIA_MAJOR, minor)
                mknod("nvidiactl", NVIDIA_MAJOR, 255)
        if modeset:
            mknod("nvidia-modeset", NVIDIA_MAJOR, 254)
    except OSError as exc:
        print(f"nvidia-modprobe (lab stand-in): {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
