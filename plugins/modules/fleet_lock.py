#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_lock
short_description: One fleet operation at a time - a lock on the host where the fleet's routers live
version_added: 0.5.0
description:
  - Takes, keeps or releases the fleet's lock, a file on the host it runs on (playbooks/repin.yml and site.yml take
    it on the first router of C(sglang_routers), else on the first server). It names its holder - the control node,
    the ansible-playbook process, the user, the playbook - and when it was taken.
  - A second run finds it held and stops before any change, naming the holder. A lock left by a run that ended
    without releasing it (killed, or stopped by a failure) is taken over, with a message, where the holder is known
    to be gone - its control node is this one and its process is not running - or is older than O(stale_after), or
    with O(break_lock).
  - The action plugin of the same name decides on the controller; it runs this module on the lock's host.
  - The lock lives only while a run does - taken at its start, released at its end - and leaves the host as it
    found it, so neither taking nor releasing it reports a change (a second run of a playbook still reports
    nothing changed). A takeover warns.
author: blackwell.serving maintainers (!UNKNOWN)
seealso:
  - module: blackwell.serving.sglang_router_worker
options:
  state:
    description: C(held) takes the lock (or keeps it, for its holder); C(released) removes it, where this run holds it.
    type: str
    choices: [held, released]
    default: held
  path:
    description: The lock file.
    type: path
    default: /var/lib/blackwell-serving/fleet.lock
  operation:
    description: What the run does, for the message a second run prints (the playbook's name).
    type: str
    default: a fleet operation
  stale_after:
    description: Seconds after which a lock whose holder cannot be checked (another control node) is taken over.
    type: int
    default: 21600
  break_lock:
    description: Take the lock over whoever holds it (the message says whom it was taken from).
    type: bool
    default: false
  holder:
    description: This run, as the action plugin names it (control node, process, user, playbook, token); set by it.
    type: dict
  takeover_token:
    description: The token of a holder the action plugin found gone; the lock is replaced only where it still names it.
    type: str
attributes:
  check_mode:
    description: Reads the lock and says whether the run could take it; writes nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Take the fleet's lock where the routers live
  blackwell.serving.fleet_lock:
    operation: repin.yml
  delegate_to: "{{ groups['sglang_routers'][0] }}"
  run_once: true

- name: Release it at the end of the run
  blackwell.serving.fleet_lock:
    state: released
  delegate_to: "{{ groups['sglang_routers'][0] }}"
  run_once: true
"""

RETURN = r"""
state:
  description: C(taken), C(held) (this run had it), C(taken_over), C(busy) (another run has it), C(released) or C(free).
  returned: always
  type: str
  sample: taken
holder:
  description: The lock's holder after the call (control node, process, user, playbook, token, since).
  returned: always
  type: dict
  sample: {controller: ops-1, pid: 4242, user: ops, playbook: repin.yml, token: 9f1c, since: 1796520000.0}
previous:
  description: The holder a takeover replaced.
  returned: when the lock was taken over
  type: dict
  sample: {controller: ops-1, pid: 4100, user: ops, playbook: repin.yml, token: 77aa, since: 1796510000.0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import fleet_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["held", "released"], default="held"),
            path=dict(type="path", default="/var/lib/blackwell-serving/fleet.lock"),
            operation=dict(type="str", default="a fleet operation"),
            stale_after=dict(type="int", default=21600),
            break_lock=dict(type="bool", default=False),
            # set by the action plugin: this run's holder, and the token of a holder it found gone
            holder=dict(type="dict", default=None),
            takeover_token=dict(type="str", default=None, no_log=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    holder = p["holder"]
    if not holder or not holder.get("token"):
        module.fail_json(msg="fleet_lock runs through its action plugin, which names the holder")
    if p["state"] == "released":
        if module.check_mode:
            current = fleet_lock.read(p["path"])
            mine = bool(current) and current.get("token") == holder["token"]
            module.exit_json(changed=False, state="released" if mine else "free", holder=current or {})
        done = fleet_lock.release(p["path"], holder["token"])
        module.exit_json(changed=False, state="released" if done else "free", holder={})
    if module.check_mode:
        current = fleet_lock.read(p["path"])
        if current is None or current.get("token") == holder["token"]:
            module.exit_json(changed=False, state="taken" if current is None else "held", holder=holder)
        if p["takeover_token"] is not None and current.get("token") == p["takeover_token"]:
            module.exit_json(changed=False, state="taken_over", holder=holder, previous=current)
        module.exit_json(changed=False, state="busy", holder=current)
    previous = fleet_lock.read(p["path"])
    state, now = fleet_lock.take(p["path"], holder, p["takeover_token"])
    result = dict(changed=False, state=state, holder=now)
    if state == "taken_over":
        result["previous"] = previous
    module.exit_json(**result)


if __name__ == "__main__":
    main()
