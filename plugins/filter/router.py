# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters of the router's view of its servers (role sglang_router, verify)."""

from __future__ import annotations


def _norm(url):
    return str(url or "").rstrip("/")


def router_worker_url(hostvars):
    """The address of a server as the routers reach it, from its host's variables: sglang_router_worker_url, else
    http://<sglang_router_worker_address or its default IPv4 address>:<sglang_service_port>."""
    hv = hostvars
    given = hv.get("sglang_router_worker_url") if hasattr(hv, "get") else None
    if given:
        return given
    address = hv.get("sglang_router_worker_address") if hasattr(hv, "get") else None
    if not address:
        facts = hv.get("ansible_facts") or {} if hasattr(hv, "get") else {}
        address = (facts.get("default_ipv4") or {}).get("address") or "ADDRESS-UNKNOWN"
    port = hv.get("sglang_service_port") if hasattr(hv, "get") else None
    return f"http://{address}:{port or 30000}"


def router_membership(reads, url, known):
    """Where a server stands in each router, from sglang_router_worker's state=query answers (a loop's results, each
    with the router host as item): {"routers": {router: {"listed", "healthy", "error"}}, "unknown": {router: [urls of
    entries that are no server of the group]}}."""
    known = {_norm(u) for u in known or []}
    out = {"routers": {}, "unknown": {}}
    for read in reads or []:
        router = read.get("item")
        if read.get("failed") or "workers" not in read:
            out["routers"][router] = {"listed": False, "healthy": False,
                                      "error": read.get("msg") or "the router did not answer"}
            continue
        mine = [w for w in read["workers"] if _norm(w.get("url")) == _norm(url)]
        out["routers"][router] = {"listed": bool(mine), "healthy": bool(mine) and all(w.get("healthy") for w in mine),
                                  "error": None}
        strangers = sorted(_norm(w.get("url")) for w in read["workers"] if _norm(w.get("url")) not in known)
        if strangers:
            out["unknown"][router] = strangers
    return out


class FilterModule:
    def filters(self):
        return {"router_worker_url": router_worker_url, "router_membership": router_membership}
