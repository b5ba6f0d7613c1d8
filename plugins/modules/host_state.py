#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_state
short_description: Say, in one round trip, whether everything a role's phase would change already holds
version_added: 0.2.0
description:
  - Reads, at once, the files, packages and systemd units that a role's phase would change, and compares each
    with what the phase would leave (a file's exact content, owner, group and mode, or its absence, a
    directory, a symbolic link's target; a package's installed version and hold; every installed package a
    regular expression matches; a unit's enablement and activity).
  - RV(holds) is true only when nothing differs; RV(differences) lists what does. A role skips a phase that
    holds, so that a converged host pays one round trip instead of one per task; a phase that does not hold
    runs as it would without this module, with its own check mode and diff.
  - O(read) reports paths without judging them, O(commands) runs read-only commands, and RV(units) says what
    systemd said of each unit of O(units); so a caller that compares recorded state itself reads it in the same
    round trip.
  - Changes nothing; runs the same in check mode.
author: blackwell.serving maintainers (!UNKNOWN)
options:
  groups:
    description: Groups, each wanted present.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The group.
        type: str
        required: true
  users:
    description: Users, each wanted present.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The user.
        type: str
        required: true
      group:
        description: Its primary group's name; not compared when left out.
        type: str
      home:
        description: Its home directory; not compared when left out.
        type: str
      shell:
        description: Its login shell; not compared when left out.
        type: str
  files:
    description: Paths, each with what the phase would leave there.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      state:
        description:
          - A regular file, nothing, a directory, or a symbolic link (judged unfollowed).
          - C(exists), anything there, links followed (what a command's C(creates) tests).
        type: str
        choices: [file, absent, directory, link, exists]
        default: file
      content:
        description: The file's exact content (what a template or copy task would write); not compared when left out.
        type: str
      src:
        description: The link's target, as written in the link (C(state=link)); any target when left out.
        type: str
      owner:
        description: The owner's name; not compared when left out.
        type: str
      group:
        description: The group's name; not compared when left out.
        type: str
      mode:
        description: The permission bits, as an octal string such as C("0644"); not compared when left out.
        type: str
      validate:
        description: Ignored here; M(blackwell.serving.host_files) takes it (so that one list of entries serves the
          read and the writes).
        type: str
      systemd_unit:
        description: Ignored here; M(blackwell.serving.host_files) takes it (so that one list of entries serves the
          read and the writes).
        type: bool
        default: false
      secret:
        description: Ignored here; M(blackwell.serving.host_files) takes it (so that one list of entries serves the
          read and the writes). Give the reading task C(no_log) where a content is secret.
        type: raw
  packages:
    description: Debian packages (read with one C(dpkg-query)), each wanted installed.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The packages wanted this way (one or more).
        type: list
        elements: str
        required: true
      version:
        description:
          - The version each must be at, exactly, or a glob (C(1.2.3-*), as apt's preferences read a version
            pin); any when left out.
        type: str
      held:
        description: Whether it must be held (C(dpkg --get-selections) says C(hold)).
        type: bool
        default: false
      state:
        description:
          - C(present), installed; C(offered), installed when the configured repositories offer it at
            O(packages[].version) (C(apt-cache madison) answers, only for a package that is not installed);
            C(absent), not installed.
        type: str
        choices: [present, offered, absent]
        default: present
  patterns:
    description: Sets of installed packages, each named by a regular expression; every package it matches must be as asked.
    type: list
    elements: dict
    default: []
    suboptions:
      match:
        description: A regular expression searched in each installed package's name.
        type: str
        required: true
      exclude:
        description: Packages this regular expression matches are left out.
        type: str
      version:
        description:
          - The version each must be at, exactly, or a glob (C(1.2.3-*), as apt's preferences read a version
            pin); any when left out.
        type: str
      held:
        description: Whether each must be held.
        type: bool
        default: false
  units:
    description: systemd units (read with one C(systemctl show)).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The unit's full name, C(nvidia-persistenced.service).
        type: str
        required: true
      enabled:
        description: Whether it must be enabled (C(enabled)) or disabled (C(disabled)); not compared when left out.
        type: bool
      active:
        description: Whether it must be active; not compared when left out.
        type: bool
  absent_lines:
    description: Sets of files in which no line may match a regular expression (what a phase would remove).
    type: list
    elements: dict
    default: []
    suboptions:
      paths:
        description: Glob patterns naming the files (directories and other non-files are left out).
        type: list
        elements: str
        required: true
      regex:
        description: A regular expression matched at the start of each line, as the find module's C(contains) does.
        type: str
        required: true
      except:
        description: Files left out (the phase's own).
        type: list
        elements: str
        default: []
  read:
    description:
      - Paths reported as they are, not judged (RV(paths)), for a caller that compares them itself, read in the same
        round trip.
    type: list
    elements: dict
    default: []
    suboptions:
      paths:
        description: The paths read this way (one or more); a link is not followed.
        type: list
        elements: path
        required: true
      checksum:
        description: The SHA-256 of each regular file.
        type: bool
        default: false
      content:
        description: The text of each regular file (a note or record, 1 MiB at most).
        type: bool
        default: false
      entries:
        description:
          - The entries of each directory (not of a link to one), hidden ones too, each with C(path), C(isdir), C(isreg),
            C(islnk) (unfollowed) and C(mtime), as the find module lists them with O(ignore:recurse=false).
        type: bool
        default: false
      snapshot:
        description:
          - For each directory (not a link to one), what the model snapshot marker in it (C(.blackwell-snapshot.json),
            written by M(blackwell.serving.model_snapshot)) records, judged as that module judges it before it asks the
            Hub - C(repo_id), C(revision), and C(complete), whether every file the marker lists is as it recorded it
            when its content last matched (size, modification and change times, inode); no file is read, no request is
            made. Null without a marker.
        type: bool
        default: false
  free_space:
    description:
      - Paths whose free space is measured (RV(free_space), in this order), each on its nearest existing parent
        where it is not there yet, as C(df) measures it; not judged.
    type: list
    elements: path
    default: []
  listening:
    description:
      - TCP ports whose listening processes are named (RV(listening)), as C(ss -ltnp) finds them; not judged.
    type: list
    elements: int
    default: []
  commands:
    description:
      - Read-only commands run in the same round trip, in order (RV(commands)), such as a version query or a
        lookup. Never one that changes anything, since they run in check mode too; their answers are not judged.
    type: list
    elements: dict
    default: []
    suboptions:
      argv:
        description: The command and its arguments (no shell).
        type: list
        elements: str
        required: true
      environment:
        description: Variables added to its environment.
        type: dict
        default: {}
attributes:
  check_mode:
    description: Reads only; returns the same result in check mode.
    support: full
  diff_mode:
    description: Returns no diff; the phase it lets run says what it changes.
    support: none
seealso:
  - module: ansible.builtin.package_facts
  - module: ansible.builtin.stat
"""

EXAMPLES = r"""
- name: install | What the phase would change, read at once
  blackwell.serving.host_state:
    files:
      - path: /etc/apt/preferences.d/blackwell-cuda-toolkit.pref
        content: "{{ lookup('ansible.builtin.template', 'cuda-toolkit.pref.j2') }}"
        owner: root
        group: root
        mode: "0644"
    packages:
      - {name: [cuda-toolkit-12-9], version: 12.9.1-1, held: true}
    patterns:
      - {match: '^cuda-.*-12-9$', held: true}
  register: __cuda_toolkit_state

- name: install | The phase, unless it holds
  when: not __cuda_toolkit_state.holds
  block:
    - name: install | Pin the toolkit
      ansible.builtin.template:
        src: cuda-toolkit.pref.j2
        dest: /etc/apt/preferences.d/blackwell-cuda-toolkit.pref
        owner: root
        group: root
        mode: "0644"
"""

RETURN = r"""
holds:
  description: Whether every group, user, file, package, unit and line is as asked.
  returned: always
  type: bool
  sample: true
differences:
  description: What differs, one sentence each; empty when RV(holds).
  returned: always
  type: list
  elements: str
  sample: ["/etc/apt/preferences.d/blackwell-cuda-toolkit.pref differs in content", "package cuda-toolkit-12-9 is not held (install)"]
installed:
  description: The installed version of each named package and of each package a pattern matches (absent ones left out).
  returned: always
  type: dict
  sample: {cuda-toolkit-12-9: 12.9.1-1}
paths:
  description:
    - Each path of O(read), as the stat module names what it finds (a link not followed); C(lnk_source) is where
      a link resolves to, C(lnk_target) what it says; C(checksum) (SHA-256) and C(content) where asked, for a
      regular file; C(entries) where asked, for a directory (name -> C(path), C(isdir), C(isreg), C(islnk), C(mtime));
      C(snapshot) where asked, for a directory (C(repo_id), C(revision), C(complete); null without a marker).
  returned: always
  type: dict
  sample: {/etc/sglang/deployed/release: {exists: true, isreg: false, isdir: false, islnk: true,
           lnk_target: /opt/sglang/releases/3f9fc8b8, lnk_source: /opt/sglang/releases/3f9fc8b8}}
free_space:
  description:
    - For each path of O(free_space), in order, the path (C(path), C(~) expanded), the bytes a user other than root
      may still write there (C(avail), as C(df) counts them), the mount point of its file system (C(mount)) and the
      path measured (C(measured), its nearest existing parent where it is not there yet).
  returned: always
  type: list
  elements: dict
  sample: [{path: /var/lib/models, measured: /var/lib, mount: /, avail: 412316860416}]
listening:
  description:
    - For each port of O(listening), the processes that listen on it (IPv4 or IPv6), each with its C(pid), C(command)
      and systemd C(unit) (null outside one); an empty list where none does. Other users' processes are seen as root only.
  returned: always
  type: dict
  sample: {"30000": [{pid: 4242, command: python, unit: sglang.service}], "30001": []}
commands:
  description:
    - The answer of each command of O(commands), in order; a command that cannot be started has C(rc) 2 and
      says why in C(stderr), as the command module's failure does.
  returned: always
  type: list
  elements: dict
  sample: [{argv: [/usr/local/cuda/bin/nvcc, --version], rc: 0, stdout: "Cuda compilation tools, release 12.9, V12.9.86", stderr: ""}]
units:
  description: What systemd says of each unit of O(units) (C(LoadState) C(not-found) for a unit it does not know).
  returned: always
  type: dict
  sample: {sglang.service: {Id: sglang.service, LoadState: loaded, ActiveState: active, UnitFileState: enabled,
           NeedDaemonReload: "no"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.serving.plugins.module_utils import host_state


def main():
    file_spec = dict(path=dict(type="path", required=True),
                     state=dict(type="str", default="file", choices=["file", "absent", "directory", "link", "exists"]),
                     content=dict(type="str"), src=dict(type="str"), owner=dict(type="str"),
                     group=dict(type="str"), mode=dict(type="str"),
                     # the writer's keys (blackwell.serving.host_files): taken so that one list serves both, not read
                     validate=dict(type="str"), systemd_unit=dict(type="bool", default=False),
                     secret=dict(type="raw", no_log=False))
    package_spec = dict(name=dict(type="list", elements="str", required=True), version=dict(type="str"),
                        held=dict(type="bool", default=False),
                        state=dict(type="str", default="present", choices=["present", "offered", "absent"]))
    pattern_spec = dict(match=dict(type="str", required=True), exclude=dict(type="str"), version=dict(type="str"),
                        held=dict(type="bool", default=False))
    user_spec = dict(name=dict(type="str", required=True), group=dict(type="str"), home=dict(type="str"),
                     shell=dict(type="str"))
    unit_spec = dict(name=dict(type="str", required=True), enabled=dict(type="bool"), active=dict(type="bool"))
    module = AnsibleModule(
        argument_spec=dict(
            groups=dict(type="list", elements="dict", default=[], options=dict(name=dict(type="str", required=True))),
            users=dict(type="list", elements="dict", default=[], options=user_spec),
            files=dict(type="list", elements="dict", default=[], options=file_spec),
            packages=dict(type="list", elements="dict", default=[], options=package_spec),
            patterns=dict(type="list", elements="dict", default=[], options=pattern_spec),
            units=dict(type="list", elements="dict", default=[], options=unit_spec),
            read=dict(type="list", elements="dict", default=[], options=dict(
                paths=dict(type="list", elements="path", required=True), checksum=dict(type="bool", default=False),
                content=dict(type="bool", default=False), entries=dict(type="bool", default=False),
                snapshot=dict(type="bool", default=False))),
            free_space=dict(type="list", elements="path", default=[]),
            listening=dict(type="list", elements="int", default=[]),
            commands=dict(type="list", elements="dict", default=[], options=dict(
                argv=dict(type="list", elements="str", required=True), environment=dict(type="dict", default={}))),
            absent_lines=dict(type="list", elements="dict", default=[], options=dict(
                paths=dict(type="list", elements="str", required=True), regex=dict(type="str", required=True),
                **{"except": dict(type="list", elements="str", default=[])})),
        ),
        supports_check_mode=True,
    )
    p = module.params

    installed = {}
    if p["packages"] or p["patterns"]:
        rc, out, err = module.run_command(["dpkg-query", "-W", "-f", host_state.DPKG_FORMAT],
                                          environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg=f"dpkg-query could not list the packages: {err.strip()}", rc=rc)
        installed = host_state.parse_dpkg(out)

    units = {}
    if p["units"]:
        names = [u["name"] for u in p["units"]]
        rc, out, err = module.run_command(["systemctl", "show", "-p", "Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload",
                                           "--", *names], environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg=f"systemctl show could not read {', '.join(names)}: {err.strip()}", rc=rc)
        units = host_state.parse_systemctl_show(out)
        # systemctl show names a unit that is not there by the name asked for, with LoadState=not-found
        for name in names:
            units.setdefault(name, {"Id": name, "LoadState": "not-found"})

    def offered(name, version):
        rc, out, _err = module.run_command(["apt-cache", "madison", name], environ_update={"LC_ALL": "C"})
        if rc != 0:
            return False
        return any(host_state.version_matches(line.split("|")[1].strip(), version) for line in out.splitlines()
                   if line.count("|") >= 2 and line.split("|")[0].strip() == name) if version else bool(out.strip())

    diffs = host_state.judge(p, installed, units, offered)
    names = {n for w in p["packages"] for n in w["name"]}
    seen = {n: installed[n]["version"] for n in names if n in installed and installed[n]["state"] in host_state.INSTALLED}
    seen.update(host_state.matching(p["patterns"], installed))
    try:
        paths = {path: host_state.read_path(dict(w, path=path)) for w in p["read"] for path in w["paths"]}
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"host_state could not read a path: {exc}")
    try:
        space = [dict(host_state.free_space(path), path=path) for path in p["free_space"]]
    except OSError as exc:
        module.fail_json(msg=f"host_state could not measure the free space under a path: {exc}")
    answers = []
    for cmd in p["commands"]:
        try:
            env = {str(k): str(v) for k, v in cmd["environment"].items()}
            rc, out, err = module.run_command(cmd["argv"], environ_update=env, handle_exceptions=False)
        except OSError as exc:
            rc, out, err = 2, "", f"[Errno {exc.errno}] {exc.strerror}: {cmd['argv'][0]}"
        answers.append({"argv": cmd["argv"], "rc": rc, "stdout": out, "stderr": err})
    module.exit_json(changed=False, holds=not diffs, differences=diffs, installed=seen, paths=paths,
                     units={u["name"]: units[u["name"]] for u in p["units"]}, free_space=space,
                     commands=answers, listening=host_state.listeners(p["listening"]) if p["listening"] else {})


if __name__ == "__main__":
    main()
