#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_health
short_description: Ask an sglang server and its systemd unit whether it is up
version_added: 0.2.0
description:
  - Asks the server at O(url) for C(/health) (or C(/health_generate) with O(generate), which generates one token)
    and asks systemd for the state of O(unit), in one call, so that a wait loop can stop early when the unit
    has failed or restarted instead of waiting out its timeout.
  - Reads only; never changes anything.
author: blackwell.serving maintainers (!UNKNOWN)
extends_documentation_fragment:
  - blackwell.serving.sglang_api
options:
  url:
    required: true
  unit:
    description: The systemd unit that runs the server; empty to ask the server only.
    type: str
    default: ""
  generate:
    description: Ask C(/health_generate) (generates one token) instead of O(path).
    type: bool
    default: false
  path:
    description:
      - The path asked while waiting, C(/health) for a server; C(/readiness) for an sglang-router, which answers 200
        there once it has a healthy server.
    type: str
    default: /health
    version_added: 0.4.0
  timeout:
    default: 10
  restarts_at_start:
    description:
      - The unit's C(NRestarts) right after the deliberate (re)start that is being judged. systemd keeps counting
        automatic restarts across a deliberate restart (a bad unit that crashed before a rollback leaves its count
        behind), so only restarts above this count mean that the server started now has crashed.
    type: int
    default: 0
attributes:
  check_mode:
    description: Runs in check mode as without it.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.sglang_fingerprint
  - module: blackwell.serving.sglang_router_worker
  - name: sglang's HTTP endpoints
    description: C(/health) and C(/health_generate), as sglang's server defines them.
    link: https://docs.sglang.io/basic_usage/native_api.html
"""

EXAMPLES = r"""
- name: Wait for the server, stopping early when its unit fails
  blackwell.serving.sglang_health:
    url: http://127.0.0.1:30000
    unit: sglang.service
  register: health
  until: health.healthy or health.unit_failed
  retries: 240
  delay: 10
"""

RETURN = r"""
healthy:
  description: Whether the server answered 200.
  returned: always
  type: bool
  sample: true
status:
  description: The HTTP status, or null when the server did not answer.
  returned: always
  type: int
  sample: 503
error:
  description: Why the server did not answer 200 (the path asked and the reason); empty when it did.
  returned: always
  type: str
  sample: "/health: Service Unavailable"
unit_active_state:
  description: systemd's ActiveState of the unit (active, activating, failed, ...).
  returned: when O(unit) is set
  type: str
  sample: active
unit_sub_state:
  description: systemd's SubState of the unit (running, auto-restart, dead, ...).
  returned: when O(unit) is set
  type: str
  sample: running
unit_restarts:
  description: How often systemd restarted the unit on its own since it was last started (NRestarts).
  returned: when O(unit) is set
  type: int
  sample: 1
unit_restarts_since_start:
  description: Automatic restarts since the deliberate restart (C(NRestarts) less O(restarts_at_start)).
  returned: when O(unit) is set
  type: int
  sample: 0
unit_failed:
  description:
    - Whether the unit has failed, stopped, is restarting after a crash, or has restarted on its own since the
      deliberate restart; waiting longer will not help.
  returned: always
  type: bool
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils.http_session import secret_problem
from ansible.module_utils.urls import open_url


def ask_server(p):
    path = "/health_generate" if p["generate"] else "/" + p["path"].lstrip("/")
    headers = {"Authorization": f"Bearer {p['api_key']}"} if p["api_key"] else {}
    try:
        resp = open_url(p["url"].rstrip("/") + path, headers=headers, timeout=p["timeout"],
                        http_agent="blackwell.serving sglang_health")
        return resp.getcode(), ""
    except Exception as exc:  # HTTPError carries a status; a refused connection does not
        code = getattr(exc, "code", None)
        return code, f"{path}: {getattr(exc, 'reason', exc)}"


def ask_systemd(module, unit):
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, err = module.run_command([systemctl, "show", unit, "--property=ActiveState,SubState,NRestarts"])
    if rc != 0:
        module.fail_json(msg=f"systemctl show {unit} failed: {err.strip()}")
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return props.get("ActiveState", ""), props.get("SubState", ""), int(props.get("NRestarts") or 0)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            unit=dict(type="str", default=""),
            api_key=dict(type="str", no_log=True),
            generate=dict(type="bool", default=False),
            path=dict(type="str", default="/health"),
            timeout=dict(type="int", default=10),
            restarts_at_start=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if secret_problem(p["api_key"], "api_key"):
        module.fail_json(msg=secret_problem(p["api_key"], "api_key"))
    status, error = ask_server(p)
    result = dict(changed=False, healthy=status == 200, status=status, error=error, unit_failed=False)
    if p["unit"]:
        active, sub, restarts = ask_systemd(module, p["unit"])
        since = max(restarts - p["restarts_at_start"], 0)
        result.update(unit_active_state=active, unit_sub_state=sub, unit_restarts=restarts,
                      unit_restarts_since_start=since)
        result["unit_failed"] = active in ("failed", "inactive") or sub == "auto-restart" or since > 0
    module.exit_json(**result)


if __name__ == "__main__":
    main()
