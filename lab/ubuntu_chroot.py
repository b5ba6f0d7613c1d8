"""Run the collection's roles in a chroot of a real Ubuntu 24.04 userland (the lent GPU machine's own).

Run as root on that machine (standard library only), with the carried directory laid out by
``python3 -m lab.ubuntu_chroot_carry`` here:

    python3 lab/ubuntu_chroot.py CARRY OUT

What it does, and what it never does:
- copies the machine's root filesystem into a scratch chroot (``/tmp/h37-chroot``), leaving out /proc, /sys, /dev,
  the GPU libraries and the large trees the roles do not need (torch, CUDA, caches);
- gives the chroot its own /proc (a new mount, unmounted at the end) and a /dev of four device files made with
  mknod (null, zero, random, urandom): a tmpfs for /dev/shm; no GPU device node, no /sys, so nothing inside can reach the GPU or a module;
- builds python-apt 2.6.0 (Debian's source, carried) inside the chroot with the chroot's own g++ and Python 3.12
  against the carried libapt-pkg-dev 2.6.1 headers, linked to Ubuntu's own libapt-pkg.so.6.0: apt, dpkg and
  Python stay Ubuntu's, only the bindings are built;
- serves the carried ubuntu2404-shaped stand-in (lab/aptrepo_ubuntu.py) from 127.0.0.1 inside the chroot;
- runs ``ansible-playbook -c local`` inside the chroot (ansible-core from carried wheels) with the roles
  nvidia_driver (which calls nvidia_repo), cuda_toolkit and uv_venv, and writes what each run showed to
  OUT/summary.json and the whole output to OUT/run.log. The scenarios, in order:
  1. the userland as it is (a container image: no systemd package): the roles must stop before changing anything;
  2. with the systemd tools a server's image has (Debian bookworm's systemctl and systemd-analyze unpacked into the
     chroot, with the two libraries they need that this userland lacks, and Debian's sudo installed with dpkg for
     uv_venv's become: Ubuntu's own are out of reach): a first run over Ubuntu's 550 set, a second run (changed=0),
     what apt would move, and a run pinned to branch 590 (a clear stop).
The machine's own files outside the scratch directory are compared before and after (dpkg's status, /etc, the loaded
modules) and the comparison is part of the summary.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path("/tmp/h37-chroot")
PORT = 8681
MARKER = ".h37-chroot-runner"
# what is copied of the machine's root filesystem (usrmerge: /bin, /lib, /sbin are links into /usr)
COPY = ["bin", "sbin", "lib", "lib64", "usr", "etc", "var/lib/dpkg", "var/lib/apt", "var/lib/ucf",
        "var/cache/debconf", "var/lib/systemd", "root"]
# left out: GPU libraries, CUDA, the big Python trees (torch, triton, nvidia wheels), caches, documentation
EXCLUDE = ["usr/local/cuda*", "usr/lib/x86_64-linux-gnu/libnvidia-*", "usr/lib/x86_64-linux-gnu/libcuda*",
           "usr/lib/x86_64-linux-gnu/libnv*", "usr/lib/x86_64-linux-gnu/libcudnn*", "usr/lib/x86_64-linux-gnu/libnccl*",
           "usr/lib/x86_64-linux-gnu/libcublas*", "usr/bin/nvidia-*", "usr/share/doc", "usr/share/man",
           "usr/share/locale", "*/__pycache__", "*/dist-packages/torch", "*/dist-packages/triton",
           "*/dist-packages/nvidia", "*/dist-packages/torch-*", "*/dist-packages/nvidia_*", "*/dist-packages/triton-*",
           "*/site-packages/torch", "*/site-packages/nvidia", "*/site-packages/triton", "usr/src", "root/.cache",
           "usr/local/nvidia", "usr/lib/firmware", "usr/lib/modules"]
LOG: list[str] = []


def log(msg: str) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    LOG.append(line)


def sh(cmd: str | list[str], *, chroot: bool = False, check: bool = True, env: dict | None = None,
       timeout: int = 600) -> subprocess.CompletedProcess:
    argv = cmd if isinstance(cmd, list) else ["sh", "-c", cmd]
    if chroot:
        argv = ["chroot", str(ROOT), *argv]
    e = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
         "DEBIAN_FRONTEND": "noninteractive", **(env or {})}
    p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=timeout)
    out = (p.stdout + p.stderr).rstrip()
    log(f"$ {' '.join(argv[-3:]) if not isinstance(cmd, str) else cmd}  (rc {p.returncode})")
    if out:
        for line in out.splitlines():
            LOG.append("  " + line)
    if check and p.returncode:
        raise RuntimeError(f"{cmd!r} failed with rc {p.returncode}: {out[-2000:]}")
    return p


def host_fingerprint() -> dict:
    """What must not change on the machine: dpkg's status, /etc's files, the loaded modules, the root's listing."""
    def tree_digest(top: str) -> str:
        h = hashlib.sha256()
        for dirpath, dirs, files in os.walk(top):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(dirpath, f)
                try:
                    st = os.lstat(p)
                    h.update(f"{p}\0{st.st_size}\0{int(st.st_mtime)}\0".encode())
                except OSError:
                    pass
        return h.hexdigest()[:16]
    modules = Path("/proc/modules").read_text() if Path("/proc/modules").exists() else ""
    return {"dpkg_status": hashlib.sha256(Path("/var/lib/dpkg/status").read_bytes()).hexdigest()[:16],
            "etc": tree_digest("/etc"),
            "modules": hashlib.sha256("\n".join(sorted(l.split()[0] for l in modules.splitlines())).encode())
            .hexdigest()[:16],
            "nvidia_modules_loaded": sorted(l.split()[0] for l in modules.splitlines() if "nvidia" in l),
            "root_listing": sorted(os.listdir("/"))}


def copy_root() -> dict:
    if ROOT.exists():
        # only a chroot of this runner's own (its marker), with nothing mounted in it any more
        if not (ROOT / MARKER).is_file() or any(f" {ROOT}/" in l for l in Path("/proc/mounts").read_text().splitlines()):
            raise RuntimeError(f"{ROOT} exists and is not an unmounted chroot of this runner's: leaving it")
        shutil.rmtree(ROOT)
    ROOT.mkdir(parents=True)
    (ROOT / MARKER).write_text("made by lab/ubuntu_chroot.py\n")
    present = [c for c in COPY if os.path.lexists(f"/{c}")]
    excl = [f"--exclude=./{e}" if not e.startswith("*") else f"--exclude={e}" for e in EXCLUDE]
    t = time.monotonic()
    sh(f"tar -C / --one-file-system {' '.join(excl)} -cf - {' '.join('./' + c for c in present)} "
       f"| tar -C {ROOT} -xf -", check=False)
    for d in ("proc", "sys", "dev", "tmp", "run", "var/log", "var/cache/apt/archives/partial", "var/tmp",
              "var/lib/dpkg/updates", "opt"):
        (ROOT / d).mkdir(parents=True, exist_ok=True)
    (ROOT / "tmp").chmod(0o1777)
    (ROOT / "var/tmp").chmod(0o1777)
    size = sh(f"du -sm {ROOT}", check=False).stdout.split()[0]
    return {"copied": present, "excluded": EXCLUDE, "size_mib": int(size), "seconds": round(time.monotonic() - t, 1)}


def mount_specials() -> list[str]:
    mounted = []
    for name, major, minor in (("null", 1, 3), ("zero", 1, 5), ("random", 1, 8), ("urandom", 1, 9)):
        os.mknod(ROOT / "dev" / name, 0o666 | 0o020000, os.makedev(major, minor))
        (ROOT / "dev" / name).chmod(0o666)
    (ROOT / "dev/fd").symlink_to("/proc/self/fd")
    sh(f"mount -t proc proc {ROOT}/proc")
    mounted.append(f"{ROOT}/proc")
    # Ansible's worker processes need POSIX shared memory: a tmpfs of the chroot's own
    (ROOT / "dev/shm").mkdir()
    sh(f"mount -t tmpfs -o size=64m,mode=1777 tmpfs {ROOT}/dev/shm")
    mounted.append(f"{ROOT}/dev/shm")
    return mounted


def build_python_apt(carry: Path) -> dict:
    """python-apt's two extension modules and its Python packages, built inside the chroot."""
    work = ROOT / "tmp/h37-python-apt"
    work.mkdir()
    sh(f"tar -C {work} -xf {carry}/python-apt_2.6.0.tar.xz")
    sh(f"dpkg-deb -x {carry}/libapt-pkg-dev_2.6.1_amd64.deb {work}/aptdev")
    (work / "lib").mkdir()
    (work / "lib/libapt-pkg.so").symlink_to("/usr/lib/x86_64-linux-gnu/libapt-pkg.so.6.0")
    src = "/tmp/h37-python-apt/python-apt-2.6.0"
    cflags = ("-O2 -fPIC -std=c++11 -Wno-write-strings -DAPT_8_CLEANER_HEADERS -DAPT_9_CLEANER_HEADERS "
              "-DAPT_10_CLEANER_HEADERS -DPY_SSIZE_T_CLEAN -I/usr/include/python3.12 "
              "-I/tmp/h37-python-apt/aptdev/usr/include")
    setup = (ROOT / src.lstrip("/") / "setup.py").read_text()
    pkg_files = re.findall(r'"([a-z_-]+\.cc)"', setup.split("apt_pkg = Extension")[0])
    inst_files = ["apt_instmodule.cc", "generic.cc", "arfile.cc", "tarfile.cc"]
    t = time.monotonic()
    objs = sorted(set(pkg_files + inst_files))
    sh(f"cd {src}/python && printf '%s\\n' {' '.join(objs)} | xargs -P 16 -I{{}} sh -c "
       f"'g++ {cflags} -c {{}} -o {{}}.o'", chroot=True, timeout=500)
    dest = "/usr/lib/python3/dist-packages"
    suffix = sh(["python3", "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                chroot=True).stdout.strip()
    for mod, files in (("apt_pkg", pkg_files), ("apt_inst", inst_files)):
        sh(f"cd {src}/python && g++ -shared {' '.join(f + '.o' for f in files)} -L/tmp/h37-python-apt/lib "
           f"-lapt-pkg -o {dest}/{mod}{suffix}", chroot=True)
    for pkg in ("apt", "aptsources"):
        shutil.copytree(ROOT / src.lstrip("/") / pkg, ROOT / dest.lstrip("/") / pkg)
    ldd = sh(f"ldd {dest}/apt_pkg{suffix}", chroot=True).stdout
    probe = sh(["python3", "-c", "import apt_pkg, apt, apt.debfile; apt_pkg.init(); "
                "print(apt_pkg.VERSION, apt_pkg.config.find('APT::Architecture'), apt_pkg.__file__)"],
               chroot=True).stdout.strip()
    return {"seconds": round(time.monotonic() - t, 1), "import": probe,
            "libapt": [l.strip() for l in ldd.splitlines() if "apt-pkg" in l],
            "compiler": sh(["g++", "--version"], chroot=True).stdout.splitlines()[0],
            "python": sh(["python3", "--version"], chroot=True).stdout.strip()}


def add_systemd_tools(carry: Path) -> dict:
    """Debian bookworm's systemctl and systemd-analyze (and their private libraries, unit files and the shared
    libraries this userland lacks: libkmod, libip4tc, libapparmor), copied into the chroot's /usr without dpkg:
    Ubuntu's libsystemd0 255 is installed, and Debian's systemd package would replace it. Then Debian's sudo, installed with dpkg (its
    dependencies are Ubuntu's own packages)."""
    scratch = Path("/tmp/h37-systemd")
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir()
    for deb in ("systemd_252.39-1~deb12u2_amd64.deb", "libsystemd-shared_252.39-1~deb12u2_amd64.deb",
                "libkmod2_30+20221128-1_amd64.deb", "libip4tc2_1.8.9-2_amd64.deb",
                "libapparmor1_3.0.8-3_amd64.deb"):
        sh(["dpkg-deb", "-x", str(carry / deb), str(scratch)])
    placed = []

    def place(src: Path, dest: str, overwrite: bool = True) -> None:
        target = ROOT / dest.lstrip("/")
        if target.exists() or target.is_symlink():
            if not overwrite:
                return
            raise RuntimeError(f"{dest} is in the chroot already: not replacing Ubuntu's file")
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, target)
        placed.append(dest)

    place(scratch / "bin/systemctl", "/usr/bin/systemctl")
    place(scratch / "usr/bin/systemd-analyze", "/usr/bin/systemd-analyze")
    for lib in sorted((scratch / "usr/lib/x86_64-linux-gnu/systemd").glob("libsystemd-*.so")):
        place(lib, f"/usr/lib/x86_64-linux-gnu/systemd/{lib.name}")
    # only the libraries this userland lacks (a soname Ubuntu has stays Ubuntu's)
    for lib in sorted((scratch / "usr/lib/x86_64-linux-gnu").glob("lib*.so.*")):
        place(lib, f"/usr/lib/x86_64-linux-gnu/{lib.name}", overwrite=False)
    units = 0
    for unit in sorted((scratch / "lib/systemd/system").iterdir()):
        if not unit.is_dir():
            before = len(placed)
            place(unit, f"/usr/lib/systemd/system/{unit.name}", overwrite=False)
            units += len(placed) - before
    sh("ldconfig", chroot=True)
    sudo = sh(["dpkg", "-i", f"/opt/h37-carry/sudo_1.9.13p3-1+deb12u4_amd64.deb"], chroot=True, check=False)
    return {"placed": [p for p in placed if "/systemd/system/" not in p], "unit_files": units,
            "systemctl": sh(["systemctl", "--version"], chroot=True, check=False).stdout.splitlines()[:1],
            "analyze": sh(["systemd-analyze", "--version"], chroot=True, check=False).stdout.splitlines()[:1],
            "sudo": {"rc": sudo.returncode,
                     "version": sh(["sudo", "-V"], chroot=True, check=False).stdout.splitlines()[:1]}}


def chroot_dpkg_digest() -> str:
    return hashlib.sha256((ROOT / "var/lib/dpkg/status").read_bytes()).hexdigest()[:16]


def install_ansible(carry: Path) -> str:
    target = ROOT / "opt/h37-ansible"
    sh(f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target {target} "
       f"{carry}/whl/*.whl")
    shutil.copytree(carry / "collection", ROOT / "opt/h37-collections/ansible_collections/blackwell/serving",
                    symlinks=True)
    shutil.copytree(carry / "www", ROOT / "opt/h37-www")
    shutil.copytree(carry / "play", ROOT / "opt/h37-play")
    (ROOT / "opt/h37-carry").mkdir()
    shutil.copy(carry / "sudo_1.9.13p3-1+deb12u4_amd64.deb", ROOT / "opt/h37-carry")
    return sh(["python3", "-c", "import sys; sys.path.insert(0, '/opt/h37-ansible'); import ansible, jinja2, yaml; "
               "print('ansible-core', ansible.__version__, 'jinja2', jinja2.__version__, 'PyYAML', yaml.__version__)"],
              chroot=True).stdout.strip()


PLAY_ENV = {"PYTHONPATH": "/opt/h37-ansible", "ANSIBLE_COLLECTIONS_PATH": "/opt/h37-collections",
            "ANSIBLE_CONFIG": "/opt/h37-play/ansible.cfg", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1",
}


def play(name: str, *extra: str) -> dict:
    t = time.monotonic()
    p = sh(["python3", "/opt/h37-ansible/bin/ansible-playbook", "-i", "/opt/h37-play/inventory.yml",
            "/opt/h37-play/site.yml", *extra], chroot=True, check=False, env=PLAY_ENV, timeout=480)
    out = p.stdout + p.stderr
    recap = re.search(r"image\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+"
                      r"skipped=(\d+)", out)
    failed = re.findall(r"(?:fatal|failed): \[image\][^\n]*\n?[^\n]*", out)
    msgs = re.findall(r'"msg": "([^"]{0,600})', out)
    skipped_chroot = re.findall(r"TASK \[([^\]]+)\][^\n]*\n(?:[^\n]*\n)?skipping: \[image\]", out)
    changed = re.findall(r"TASK \[([^\]]+)\][^\n]*\n(?:[^\n]*\n)?changed: \[image\]", out)
    return {"name": name, "rc": p.returncode, "seconds": round(time.monotonic() - t, 1),
            "recap": dict(zip(["ok", "changed", "unreachable", "failed", "skipped"],
                              map(int, recap.groups()))) if recap else None,
            "changed_tasks": changed, "failed": failed[:3], "messages": msgs[-3:],
            "skipped_tasks": skipped_chroot}


def main() -> int:
    carry, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    summary: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    summary["host_before"] = host_fingerprint()
    summary["os_release"] = dict(l.split("=", 1) for l in Path("/etc/os-release").read_text().split("\n") if "=" in l)
    summary["apt"] = sh("apt-get --version | head -1; dpkg --version | head -1").stdout.strip().splitlines()
    mounted: list[str] = []
    server = None
    try:
        summary["copy"] = copy_root()
        mounted = mount_specials()
        summary["python_apt"] = build_python_apt(carry)
        summary["ansible"] = install_ansible(carry)
        server = subprocess.Popen(["chroot", str(ROOT), "python3", "-m", "http.server", str(PORT), "--bind",
                                   "127.0.0.1", "--directory", "/opt/h37-www"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        # Ubuntu's archive is out of reach there (no network): its entries are set aside in the chroot, and the
        # stand-in distribution archive (Ubuntu's headless 550 set, linux-headers-generic) is served in its place
        sh("mkdir -p /etc/apt/h37-set-aside && for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do "
           "[ -f \"$f\" ] && mv \"$f\" /etc/apt/h37-set-aside/; done; true", chroot=True)
        # the case of a distribution driver already there (issue 22's point 1): Ubuntu's headless 550 set
        sh("install -m 0644 /opt/h37-www/lab-standin-archive-keyring.gpg /usr/share/keyrings/ && echo "
           f"'deb [signed-by=/usr/share/keyrings/lab-standin-archive-keyring.gpg] http://127.0.0.1:{PORT}/"
           "lab-standin-distribution-archive/ /' > /etc/apt/sources.list.d/lab-distribution.list && "
           "apt-get -q update && apt-get -q -y install --no-install-recommends nvidia-headless-550 "
           "nvidia-utils-550 && dpkg-query -W 'nvidia-*550*' 'libnvidia-*550*'", chroot=True)
        summary["before_550"] = sh("dpkg-query -W -f '${Package} ${Version}\\n' '*550*'", chroot=True).stdout.split("\n")
        summary["is_chroot"] = sh(["python3", "-c", "import sys; sys.path.insert(0, '/opt/h37-ansible'); "
                                   "from ansible.module_utils.facts.system.chroot import is_chroot; print(is_chroot())"],
                                  chroot=True, check=False, env=PLAY_ENV).stdout.strip()
        # 1. the userland as it is: no systemd package
        dpkg_before = chroot_dpkg_digest()
        etc_before = sh(f"cd {ROOT} && find etc -newer {ROOT / MARKER} | sort", check=False).stdout
        summary["without_systemd"] = play("without systemd")
        summary["without_systemd"]["dpkg_unchanged"] = chroot_dpkg_digest() == dpkg_before
        summary["without_systemd"]["etc_written"] = [
            l for l in sh(f"cd {ROOT} && find etc -newer {ROOT / MARKER} | sort", check=False).stdout.splitlines()
            if l not in etc_before.splitlines()]
        # 2. with the systemd tools and sudo a server's image has
        summary["systemd_tools"] = add_systemd_tools(carry)
        runs = [play("first"), play("second")]
        summary["runs"] = runs
        summary["after"] = {
            "dist_upgrade": sh("apt-get -s dist-upgrade | grep -E '^(Inst|Remv|[0-9]+ upgraded)'",
                               chroot=True, check=False).stdout.strip().splitlines(),
            "upgrade_590_offered": sh("apt-cache policy nvidia-headless-open libnvidia-compute nvidia-headless-580-open"
                                      " | head -30", chroot=True, check=False).stdout.strip().splitlines(),
            "installed": sh("dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' "
                            "'nvidia-*' 'libnvidia-*' 'cuda-*' '*550*' | grep -v '^$' | sort", chroot=True,
                            check=False).stdout.strip().splitlines(),
            "holds": sh("apt-mark showhold", chroot=True, check=False).stdout.split(),
            "dpkg_log_installs": sh("grep -E ' (install|remove|purge) ' /var/log/dpkg.log | awk '{print $3, $4, $5}'",
                                    chroot=True, check=False).stdout.strip().splitlines(),
            "sources": sh("grep -rh . /etc/apt/sources.list.d/ | grep -v '^#'", chroot=True,
                          check=False).stdout.strip().splitlines(),
            "keys": sh("ls -l /etc/apt/keyrings/ /usr/share/keyrings/ | grep -i -E 'nvidia|cuda'; "
                       "gpg --show-keys --with-colons /etc/apt/keyrings/* 2>/dev/null | grep ^fpr",
                       chroot=True, check=False).stdout.strip().splitlines(),
            "pins": sh("head -50 /etc/apt/preferences.d/*", chroot=True, check=False).stdout.strip().splitlines(),
            "enabled_units": sh("ls /etc/systemd/system/multi-user.target.wants/", chroot=True,
                                check=False).stdout.split(),
            "unit_files": sh("ls /etc/systemd/system/", chroot=True, check=False).stdout.split(),
            "venv": sh("/opt/sglang/venv/bin/python -c 'import sys; print(sys.executable, sys.version.split()[0], "
                       "sys.base_prefix)'; stat -c '%U:%G %a' /opt/sglang/venv; /opt/uv/uv-0.13.9/bin/uv --version",
                       chroot=True, check=False).stdout.strip().splitlines(),
        }
        summary["above_580"] = play("branch 590", "-e", "nvidia_driver_branch=590",
                                    "-e", "nvidia_driver_version=590.48.01")
    except Exception as exc:  # pylint: disable=broad-except
        summary["error"] = str(exc)[-3000:]
        log(f"ERROR {exc}")
    finally:
        if server:
            server.terminate()
            server.wait(timeout=10)
        for m in reversed(mounted):
            sh(["umount", m], check=False)
        summary["host_after"] = host_fingerprint()
        summary["host_unchanged"] = summary["host_before"] == summary["host_after"]
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (out / "run.log").write_text("\n".join(LOG) + "\n")
    return 0 if "error" not in summary else 1


if __name__ == "__main__":
    sys.exit(main())
