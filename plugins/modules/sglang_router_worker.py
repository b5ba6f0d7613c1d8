#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_router_worker
short_description: Take an sglang server out of an sglang-router, drained, or put it back
version_added: 0.2.0
description:
  - Talks to the worker API of C(sglang-router) (0.3.x, C(GET/POST /workers), C(DELETE /workers/ID)), which
    queues additions and removals and answers 202, so that this module waits until the router's list shows the
    result.
  - With O(state=absent) the router sends the server no new requests; the module then waits until the server has
    finished what it was doing (drained). A server that exports metrics (C(--enable-metrics)) is asked for its
    C(sglang:num_running_reqs) and C(sglang:num_queue_reqs) until both are 0; one that does not is given
    O(drain_grace) seconds.
  - With O(state=present) the router adds the server and health-checks it; the module waits until the router lists
    it as healthy, and fails (saying so) when the router does not within O(timeout).
  - O(state=query) only reports the router's workers.
author: blackwell.serving maintainers (!UNKNOWN)
extends_documentation_fragment:
  - blackwell.serving.sglang_api
options:
  router_url:
    description: The router's base address, for example C(http://10.0.0.5:30000).
    type: str
    required: true
  url:
    required: false
  state:
    description: V(absent) drains the server out of the router, V(present) puts it back, V(query) reads only.
    type: str
    choices: [absent, present, query]
    default: present
  min_healthy:
    description:
      - With O(state=absent), refuse (changing nothing) unless at least this many other healthy servers stay in the
        router, so that a drain never takes the last servers out of service.
    type: int
    default: 1
  drain_timeout:
    description: Seconds at most to wait for the server's running requests to finish after it left the router.
    type: int
    default: 600
  drain_grace:
    description: Seconds to wait after removal when the server exports no metrics (its requests cannot be counted).
    type: int
    default: 30
  timeout:
    description: Seconds at most to wait for the router to carry out an addition or removal.
    default: 120
attributes:
  check_mode:
    description: Says what would change; adds, removes and waits for nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
notes:
  - O(url) is the server's address as the router knows it (for example C(http://10.0.0.11:30000)), and O(api_key)
    also serves to read a draining server's metrics; a server put back is added with it, so that the router's own
    calls to the server (its health checks) carry it.
seealso:
  - module: blackwell.serving.sglang_health
  - name: sglang-router
    description: The router, its worker API (C(/workers)) and its options.
    link: https://pypi.org/project/sglang-router/
"""

EXAMPLES = r"""
- name: Drain this server out of the router
  blackwell.serving.sglang_router_worker:
    router_url: http://router-1:30000
    url: http://{{ ansible_facts.default_ipv4.address }}:30000
    state: absent
  delegate_to: localhost

- name: Put it back once it passed its health gate
  blackwell.serving.sglang_router_worker:
    router_url: http://router-1:30000
    url: http://{{ ansible_facts.default_ipv4.address }}:30000
    state: present
  delegate_to: localhost
"""

RETURN = r"""
workers:
  description: The router's workers at the end, each with its C(url), whether the router finds it C(healthy), and its C(id).
  returned: always
  type: list
  elements: dict
  sample: [{url: "http://10.0.0.11:30000", healthy: true, id: "9f1c2d3e-7a4b-4c5d-8e6f-0a1b2c3d4e5f"}]
healthy_others:
  description: How many healthy workers other than O(url) the router has.
  returned: when O(url) is set
  type: int
  sample: 2
present:
  description: With O(state=query), whether the router lists O(url).
  returned: with O(state=query) when O(url) is set
  type: bool
  sample: true
drained_by:
  description:
    - How the drain knew the server was idle, once it left the router. V(metrics) when its C(sglang:num_running_reqs)
      and C(sglang:num_queue_reqs) reached 0; V(grace) when it exports no such gauges and was given O(drain_grace)
      seconds; V(stopped) when it stopped answering (nothing left to run).
  returned: with O(state=absent) when the server was in the router and removed from it (not in check mode)
  type: str
  choices: [metrics, grace, stopped]
  sample: metrics
waited:
  description: Seconds spent waiting for the router and the drain.
  returned: always
  type: float
  sample: 4.2
"""

import json
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils.http_session import secret_problem
from ansible.module_utils.urls import open_url


class RouterError(Exception):
    pass


def _request(method, url, body=None, headers=None, timeout=10):
    data = None if body is None else json.dumps(body)
    headers = dict(headers or {})
    if data is not None:
        headers["Content-Type"] = "application/json"
    try:
        resp = open_url(url, data=data, method=method, headers=headers, timeout=timeout)
        return resp.getcode(), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise RouterError(f"{method} {url}: {getattr(exc, 'reason', exc)}") from exc


def normalise(url):
    return url.rstrip("/")


def auth(api_key):
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def list_workers(router, headers=None):
    status, body = _request("GET", router + "/workers", headers=headers)
    if status != 200:
        raise RouterError(f"GET {router}/workers answered {status}: {body[:200]!r}")
    try:
        return json.loads(body).get("workers", [])
    except ValueError as exc:
        raise RouterError(f"GET {router}/workers did not answer JSON: {body[:200]!r}") from exc


def find(workers, url):
    return [w for w in workers if normalise(w.get("url", "")) == normalise(url)]


def running_requests(metrics_text):
    """Requests a server is running or holds in its queue, from its Prometheus text (None: no such gauges)."""
    total = None
    for line in metrics_text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in ("sglang:num_running_reqs", "sglang:num_queue_reqs"):
            try:
                total = (total or 0) + float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return total


def summary(workers):
    return [{"url": w.get("url"), "healthy": bool(w.get("is_healthy")), "id": w.get("id")} for w in workers]


def wait_for(predicate, timeout, interval=1.0):
    start = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value, time.monotonic() - start
        if time.monotonic() - start >= timeout:
            return value, time.monotonic() - start
        time.sleep(interval)


def drain(module, url, api_key, timeout, grace):
    headers = auth(api_key)
    state = {"how": None}

    def idle():
        try:
            status, body = _request("GET", url + "/metrics", headers=headers)
        except RouterError:
            state["how"] = "stopped"
            return True
        if status != 200:
            state["how"] = "grace"
            return True
        count = running_requests(body.decode("utf-8", "replace"))
        if count is None:
            state["how"] = "grace"
            return True
        state["how"] = "metrics"
        state["count"] = count
        return count == 0

    done, waited = wait_for(idle, timeout)
    if state["how"] == "grace":
        time.sleep(grace)
        waited += grace
    if not done:
        module.fail_json(msg=f"{url} left the router but still runs requests after {timeout} s "
                             f"(drain_timeout; its /metrics said {state.get('count', 0):g} running or queued at the "
                             "last look); it stays out of the router. Raise drain_timeout, or look at what runs.",
                         waited=waited, running=state.get("count"))
    return state["how"], waited


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type="str", required=True),
            url=dict(type="str"),
            state=dict(type="str", choices=["absent", "present", "query"], default="present"),
            api_key=dict(type="str", no_log=True),
            min_healthy=dict(type="int", default=1),
            drain_timeout=dict(type="int", default=600),
            drain_grace=dict(type="int", default=30),
            timeout=dict(type="int", default=120),
        ),
        required_if=[("state", "absent", ["url"]), ("state", "present", ["url"])],
        supports_check_mode=True,
    )
    p = module.params
    if secret_problem(p["api_key"], "api_key"):
        module.fail_json(msg=secret_problem(p["api_key"], "api_key"))
    router = normalise(p["router_url"])
    url = normalise(p["url"]) if p["url"] else None
    result = dict(changed=False, waited=0.0)
    headers = auth(p["api_key"])
    try:
        workers = list_workers(router, headers)
        result["workers"] = summary(workers)
        if url is None or p["state"] == "query":
            if url is not None:
                result["healthy_others"] = sum(1 for w in workers if w.get("is_healthy") and not find([w], url))
                result["present"] = bool(find(workers, url))
            module.exit_json(**result)
        mine = find(workers, url)
        others = [w for w in workers if not find([w], url) and w.get("is_healthy")]
        result["healthy_others"] = len(others)

        if p["state"] == "absent":
            if not mine:
                module.exit_json(**result)
            if len(others) < p["min_healthy"]:
                module.fail_json(
                    msg=f"Refusing to drain {url}: the router {router} would keep {len(others)} healthy server(s), fewer "
                        f"than {p['min_healthy']} (min_healthy). Nothing was changed. Bring other servers back first, or "
                        "make the rollout's batches smaller.", **result)
            result["changed"] = True
            if module.check_mode:
                module.exit_json(**result)
            for w in mine:
                status, body = _request("DELETE", f"{router}/workers/{w['id']}", headers=headers)
                if status not in (200, 202, 204):
                    module.fail_json(msg=f"The router {router} refused to remove {url}: {status} {body[:200]!r}", **result)
            gone, waited = wait_for(lambda: not find(list_workers(router, headers), url), p["timeout"])
            result["waited"] = waited
            if not gone:
                module.fail_json(msg=f"The router {router} still lists {url} {p['timeout']} s after its removal was "
                                     "queued.", **result)
            how, drained = drain(module, url, p["api_key"], p["drain_timeout"], p["drain_grace"])
            result["drained_by"] = how
            result["waited"] += drained
        else:
            if mine and all(w.get("is_healthy") for w in mine):
                module.exit_json(**result)
            result["changed"] = True
            if module.check_mode:
                module.exit_json(**result)
            if not mine:
                # the key goes with the worker: the router's own calls to it (health checks, model info) carry it
                worker = dict({"url": url}, **({"api_key": p["api_key"]} if p["api_key"] else {}))
                status, body = _request("POST", f"{router}/workers", body=worker, headers=headers)
                if status not in (200, 201, 202):
                    module.fail_json(msg=f"The router {router} refused to add {url}: {status} {body[:200]!r}", **result)

            def healthy():
                found = find(list_workers(router, headers), url)
                return bool(found) and all(w.get("is_healthy") for w in found)

            ok, waited = wait_for(healthy, p["timeout"])
            result["waited"] = waited
            if not ok:
                module.fail_json(
                    msg=f"The router {router} does not list {url} as a healthy worker {p['timeout']} s after it was "
                        "asked to add it (the router health-checks a worker before it takes it: is the server up, and "
                        "reachable from the router at that address?).", **result)
        result["workers"] = summary(list_workers(router, headers))
    except RouterError as exc:
        module.fail_json(msg=f"The router {router} did not answer: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
