# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Judge whether what a role's phase would change on a host already holds.

Pure functions, no Ansible imports: the module ``host_state`` reads the host (one ``dpkg-query`` for every
package, one ``systemctl show`` for every unit, a stat and a read per file) and calls these. A phase may be
skipped only when every thing it would change is as the phase would leave it, so each judge here lists every
difference it finds, and the phase holds only when the list is empty.

A file is wanted with its exact content, owner, group and mode (what a template or copy task would write), as
absent, as a directory, or as a symbolic link to a target. A package is wanted installed (at an exact version, or
one a glob such as ``1.2.3-*`` matches, as apt's preferences read a version pin; and held, when asked), or
installed only when the configured repositories offer it. A set of packages may be named by a regular expression:
every installed package it matches must be at the version and held. A unit is
wanted enabled and, when asked, active. A group is wanted present; a user present, with its primary group, home
and shell. A package may be wanted absent; and a set of files (glob patterns) without any line a regular expression
matches.

Paths can also be read without a judgement (``read_path``), and the free space under a path (``free_space``): what
a caller compares itself (the deploy sequence's checksums, link targets and note of what the service was started
with), in the same round trip.
"""
from __future__ import annotations

import fnmatch
import glob
import grp
import hashlib
import os
import pwd
import re
import stat

from ansible_collections.blackwell.serving.plugins.module_utils import snapshot

# dpkg-query's fields: the package, its version, and its status ("hold ok installed": selection, error, state)
DPKG_FORMAT = "${binary:Package}\\t${Version}\\t${Status}\\n"
# dpkg's states in which a package's files are on the host (what apt's state=present means)
INSTALLED = ("installed",)


def parse_dpkg(text):
    """``dpkg-query -W -f DPKG_FORMAT`` output: {name: {version, selection, state}}; architecture suffixes dropped."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0]:
            continue
        name = parts[0].split(":", 1)[0]
        status = parts[2].split()
        if len(status) != 3:
            continue
        out[name] = {"version": parts[1], "selection": status[0], "state": status[2]}
    return out


def version_matches(have, want):
    """Whether version ``have`` is the wanted one: ``want`` exactly, or, where it holds ``*``, ``?`` or ``[``, one
    the glob matches (``1.2.3-*``: the upstream release at whatever packaging revision the repository gives)."""
    if any(c in want for c in "*?["):
        return fnmatch.fnmatchcase(have, want)
    return have == want


def judge_package(name, want, installed, offered=None):
    """Differences of one wanted package: want = {version (exact, or None), held (bool), state: present|offered}.

    ``offered`` answers, for a package that is not installed and wanted only when offered, whether the
    repositories offer it at the wanted version (a callable taking the name and version); it is not asked
    otherwise.
    """
    have = installed.get(name)
    if want.get("state") == "absent":
        return [f"package {name} is installed"] if have is not None and have["state"] in INSTALLED else []
    if have is None or have["state"] not in INSTALLED:
        if want.get("state", "present") == "offered":
            if offered is None or not offered(name, want.get("version")):
                return []
            return [f"package {name} is offered and not installed"]
        return [f"package {name} is not installed"]
    diffs = []
    if want.get("version") and not version_matches(have["version"], want["version"]):
        diffs.append(f"package {name} is at {have['version']}, not {want['version']}")
    if want.get("held") and have["selection"] != "hold":
        diffs.append(f"package {name} is not held ({have['selection']})")
    return diffs


def judge_pattern(want, installed):
    """Differences of every installed package matched by want = {match, exclude, version, held}."""
    match = re.compile(want["match"])
    exclude = re.compile(want["exclude"]) if want.get("exclude") else None
    diffs = []
    for name in sorted(installed):
        if installed[name]["state"] not in INSTALLED or not match.search(name):
            continue
        if exclude is not None and exclude.search(name):
            continue
        diffs += judge_package(name, {"version": want.get("version"), "held": want.get("held")}, installed)
    return diffs


def matching(patterns, installed):
    """The installed packages any pattern matches (less its exclusions): {name: version}."""
    out = {}
    for want in patterns:
        match = re.compile(want["match"])
        exclude = re.compile(want["exclude"]) if want.get("exclude") else None
        for name, have in installed.items():
            if have["state"] in INSTALLED and match.search(name) and not (exclude and exclude.search(name)):
                out[name] = have["version"]
    return out


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _owner_group_mode(path, st, want):
    diffs = []
    if want.get("owner") is not None:
        owner = _user_name(st.st_uid)
        if owner != want["owner"]:
            diffs.append(f"{path} is owned by {owner}, not {want['owner']}")
    if want.get("group") is not None:
        group = _group_name(st.st_gid)
        if group != want["group"]:
            diffs.append(f"{path} has group {group}, not {want['group']}")
    if want.get("mode") is not None:
        mode = stat.S_IMODE(st.st_mode)
        if mode != int(str(want["mode"]), 8):
            diffs.append(f"{path} has mode {mode:04o}, not {want['mode']}")
    return diffs


def judge_file(want):
    """Differences of one path: want = {path, state: file|absent|directory|link|exists, content, src, owner, group, mode}.

    ``state: file`` compares the content byte for byte (as a SHA-256) when ``content`` is given; a link is
    judged by its target as written (``src``, any target when it is left out), never followed.
    """
    path = want["path"]
    state = want.get("state", "file")
    if state == "exists":
        # what a command's creates= tests: the path, its links followed, is there
        return [] if os.path.exists(path) else [f"{path} is missing"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [] if state == "absent" else [f"{path} is missing"]
    if state == "absent":
        return [f"{path} exists"]
    if state == "link":
        if not stat.S_ISLNK(st.st_mode):
            return [f"{path} is not a symbolic link"]
        target = os.readlink(path)
        # no src: any target (a link another phase switches); the path must still be a link
        diffs = [] if want.get("src") is None or target == want["src"] else [
            f"{path} points at {target}, not {want['src']}"]
        return diffs + _owner_group_mode(path, st, {k: want.get(k) for k in ("owner", "group")})
    if state == "directory":
        if not stat.S_ISDIR(st.st_mode):
            return [f"{path} is not a directory"]
        return _owner_group_mode(path, st, want)
    if not stat.S_ISREG(st.st_mode):
        return [f"{path} is not a regular file"]
    diffs = []
    if want.get("content") is not None:
        with open(path, "rb") as fh:
            have = hashlib.sha256(fh.read()).hexdigest()
        if have != hashlib.sha256(want["content"].encode("utf-8")).hexdigest():
            diffs.append(f"{path} differs in content")
    return diffs + _owner_group_mode(path, st, want)


def judge_absent_lines(want):
    """Differences of want = {paths (glob patterns), regex, except (paths)}: no file the patterns name, other
    than the excepted ones, has a line that the regular expression matches at its start (as the find module's
    ``contains`` tests each line). A file that cannot be read counts as a difference."""
    prog = re.compile(want["regex"])
    skip = set(want.get("except") or [])
    diffs = []
    for path in sorted({p for pattern in want["paths"] for p in glob.glob(pattern)}):
        if path in skip or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                hit = any(prog.match(line) for line in fh)
        except OSError as exc:
            diffs.append(f"{path} cannot be read ({exc.strerror})")
            continue
        if hit:
            diffs.append(f"{path} has a line matching {want['regex']}")
    return diffs


# the most of a file read_path returns as text: notes and records, never weights or binaries
READ_CONTENT_MAX = 1 << 20


def read_path(want):
    """What is at want = {path, checksum, content, entries, snapshot (bools)}, unjudged, in the shape of the stat module's result.

    ``exists``, ``isreg``, ``isdir``, ``islnk`` from the path itself (a link is not followed); a link's
    ``lnk_target`` (as written) and ``lnk_source`` (the path it resolves to, as stat's); a regular file's
    ``checksum`` (SHA-256) when asked, and its ``content`` as text (UTF-8, at most READ_CONTENT_MAX bytes: a
    longer file is an error) when asked; a directory's ``entries`` when asked (not a link to one): each name in
    it, hidden ones too, with its ``path``, ``isdir``, ``isreg``, ``islnk`` (unfollowed) and ``mtime``, as find lists them;
    a directory's ``snapshot`` when asked: what its model snapshot marker records (``snapshot.recorded_state``).
    """
    path = want["path"]
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    out = {"exists": True, "isreg": stat.S_ISREG(st.st_mode), "isdir": stat.S_ISDIR(st.st_mode),
           "islnk": stat.S_ISLNK(st.st_mode)}
    if out["islnk"]:
        out["lnk_target"] = os.readlink(path)
        out["lnk_source"] = os.path.realpath(path)
    if out["isreg"] and (want.get("checksum") or want.get("content")):
        with open(path, "rb") as fh:
            data = fh.read(READ_CONTENT_MAX + 1)
            if want.get("checksum"):
                digest = hashlib.sha256(data)
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
                out["checksum"] = digest.hexdigest()
        if want.get("content"):
            if len(data) > READ_CONTENT_MAX:
                raise ValueError(f"{path} is larger than {READ_CONTENT_MAX} bytes: not read as text")
            out["content"] = data.decode("utf-8", errors="replace")
    if out["isdir"] and want.get("entries"):
        out["entries"] = {}
        with os.scandir(path) as it:
            for entry in it:
                est = entry.stat(follow_symlinks=False)
                out["entries"][entry.name] = {"path": entry.path, "isdir": stat.S_ISDIR(est.st_mode),
                                              "isreg": stat.S_ISREG(est.st_mode), "islnk": stat.S_ISLNK(est.st_mode),
                                              "mtime": est.st_mtime}
    if out["isdir"] and want.get("snapshot"):
        out["snapshot"] = snapshot.recorded_state(path)
    return out


def _mount_points(mounts_text):
    """The mount points of /proc/self/mounts (its second field, with the kernel's octal escapes undone)."""
    points = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1]))
    return points


def free_space(path, mounts_text=None):
    """What ``df -B1 --output=avail,target`` says of path, or of its nearest existing parent where it is not there
    yet: ``avail``, the bytes that a user other than root may still write there (statvfs's f_bavail, in fragments
    of f_frsize), and ``mount``, the mount point of its file system (the longest mount point that holds it, as df
    finds it in the mount table); ``measured``, the path measured. The mount facts leave out some root file
    systems (overlay among them): this reads the path itself."""
    measured = os.path.abspath(path)
    while not os.path.exists(measured):
        measured = os.path.dirname(measured)
    st = os.statvfs(measured)
    real = os.path.realpath(measured)
    if mounts_text is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
                mounts_text = fh.read()
        except OSError:
            mounts_text = ""
    holding = [m for m in _mount_points(mounts_text) if real == m or real.startswith(m.rstrip("/") + "/")]
    if holding:
        mount = max(holding, key=len)
    else:
        mount = real
        while not os.path.ismount(mount):
            mount = os.path.dirname(mount)
    return {"measured": measured, "mount": mount, "avail": st.f_bavail * st.f_frsize}


def parse_systemctl_show(text):
    """``systemctl show -p Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload UNIT...``: {Id: {property: value}}."""
    units, cur = {}, {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if cur.get("Id"):
                units[cur["Id"]] = cur
            cur = {}
            continue
        key, _sep, value = line.partition("=")
        cur[key] = value
    return units


def judge_unit(want, units):
    """Differences of one unit: want = {name, enabled (bool), active (bool or None: either)}."""
    name = want["name"]
    have = units.get(name)
    if have is None or have.get("LoadState") != "loaded":
        return [f"unit {name} is not loaded ({(have or {}).get('LoadState', 'unknown')})"]
    diffs = []
    if have.get("NeedDaemonReload") == "yes":
        diffs.append(f"unit {name} changed on disk since systemd loaded it")
    if want.get("enabled") is not None:
        # what ansible's systemd_service takes for enabled and leaves alone: enabled, or static (no [Install]
        # section: started by what needs it). It enables an enabled-runtime, indirect or alias unit; anything
        # else (generated, masked, linked) lets the phase decide too.
        state = have.get("UnitFileState")
        if state not in (("enabled", "static") if want["enabled"] else ("disabled",)):
            diffs.append(f"unit {name} is {have.get('UnitFileState')}, not "
                         f"{'enabled' if want['enabled'] else 'disabled'}")
    if want.get("active") is not None:
        # started holds only when active; stopped only when nothing runs or is on its way (systemd_service stops
        # an activating, deactivating or reloading unit too)
        state = have.get("ActiveState")
        active = state == "active" if want["active"] else state in ("active", "activating", "deactivating", "reloading")
        if active != bool(want["active"]):
            diffs.append(f"unit {name} is {have.get('ActiveState')}, not {'active' if want['active'] else 'inactive'}")
    return diffs


def judge_group(want):
    """Differences of one group: want = {name}: it exists."""
    try:
        grp.getgrnam(want["name"])
    except KeyError:
        return [f"group {want['name']} is missing"]
    return []


def judge_user(want):
    """Differences of one user: want = {name, group, home, shell}; each but the name compared when given."""
    try:
        pw = pwd.getpwnam(want["name"])
    except KeyError:
        return [f"user {want['name']} is missing"]
    diffs = []
    if want.get("group") is not None:
        group = _group_name(pw.pw_gid)
        if group != want["group"]:
            diffs.append(f"user {want['name']} has primary group {group}, not {want['group']}")
    if want.get("home") is not None and pw.pw_dir != want["home"]:
        diffs.append(f"user {want['name']} has home {pw.pw_dir}, not {want['home']}")
    if want.get("shell") is not None and pw.pw_shell != want["shell"]:
        diffs.append(f"user {want['name']} has shell {pw.pw_shell}, not {want['shell']}")
    return diffs


def judge(spec, installed, units, offered=None):
    """Every difference between the host and spec = {groups, users, files, packages, patterns, units, absent_lines}."""
    diffs = []
    for want in spec.get("groups") or []:
        diffs += judge_group(want)
    for want in spec.get("users") or []:
        diffs += judge_user(want)
    for want in spec.get("files") or []:
        diffs += judge_file(want)
    for want in spec.get("packages") or []:
        # one entry may name several packages wanted the same way
        for name in want["name"] if isinstance(want["name"], list) else [want["name"]]:
            diffs += judge_package(name, want, installed, offered)
    for want in spec.get("patterns") or []:
        diffs += judge_pattern(want, installed)
    for want in spec.get("units") or []:
        diffs += judge_unit(want, units)
    for want in spec.get("absent_lines") or []:
        diffs += judge_absent_lines(want)
    # a package named and matched by a pattern too is one difference, said once
    return list(dict.fromkeys(diffs))


def _listening_inodes(ports, net_texts):
    """{inode: port} of the TCP sockets in state LISTEN on any of the ports, from /proc/net/tcp and tcp6's text."""
    found = {}
    for text in net_texts:
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: TCP_LISTEN
                continue
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if port in ports:
                found[fields[9]] = port
    return found


def _unit_of(cgroup_text):
    """The systemd unit a process runs in, from its /proc/PID/cgroup (the last .service or .scope of its path)."""
    for line in cgroup_text.splitlines():
        for part in reversed(line.rsplit(":", 1)[-1].split("/")):
            if part.endswith((".service", ".scope")):
                return part
    return None


def listeners(ports, proc="/proc"):
    """{port: [{"pid", "command", "unit"}]} of the processes that listen on each TCP port (IPv4 and IPv6), as ss -ltnp
    finds them: the listening sockets' inodes from /proc/net/tcp*, matched to the processes' open descriptors (all
    processes need root). A port no process listens on has an empty list."""
    ports = [int(p) for p in ports]
    texts = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name), encoding="ascii", errors="replace") as fh:
                texts.append(fh.read())
        except OSError:
            continue
    inodes = _listening_inodes(set(ports), texts)
    out = {port: [] for port in ports}
    if not inodes:
        return out
    for pid in sorted((d for d in os.listdir(proc) if d.isdigit()), key=int):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        hit = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                hit.add(inodes[target[8:-1]])
        if not hit:
            continue
        try:
            with open(os.path.join(proc, pid, "comm"), encoding="utf-8", errors="replace") as fh:
                command = fh.read().strip()
            with open(os.path.join(proc, pid, "cgroup"), encoding="utf-8", errors="replace") as fh:
                unit = _unit_of(fh.read())
        except OSError:
            command, unit = None, None
        for port in sorted(hit):
            out[port].append({"pid": int(pid), "command": command, "unit": unit})
    return out
