"""The fleet: three lab servers behind the real sglang-router, re-pinned under load (issue 7's done-when).

The fleet's hosts are its own (inventories/lab-fleet), not lab-gpu-1, so that these tests run beside lab-gpu-1's
(tests/conftest.py, LAB_HOST_UNITS): the servers start from the run's one converged server image (lab/hosts.py,
converged_image: lab-gpu-1's fresh converge where the run has it, else the first chain's), so that they are
ready in seconds; the router host starts bare.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import yaml

from helpers import REPO, needs_lab, recap, run
from lab import engine, hosts, hub, paths, serve, sglang_repo

FLEET = REPO / "inventories" / "lab-fleet"
SITE = REPO / "playbooks" / "site.yml"
REPIN = REPO / "playbooks" / "repin.yml"
DRIFT = REPO / "playbooks" / "drift.yml"
# the servers as the fleet's inventory lists them, the canary first
SERVERS = list(yaml.safe_load((FLEET / "hosts.yml").read_text())["all"]["children"]["gpu_servers"]["hosts"])
FIRST, SECOND, THIRD = SERVERS
ROUTER = "lab-router-1"
API_KEY = "lab-standin-api-key-not-a-secret"

pytestmark = needs_lab


# a bound for a hung run, not a speed test: the re-pin under load (three releases built, a revision staged) ran
# past 30 minutes on a 2-core machine beside the other units
def fleet_playbook(*args, env=None, timeout=3600):
    out = run(["ansible-playbook", "-i", FLEET, *args], env=env, timeout=timeout)
    if out.returncode != 0:
        servers_said()
    return out


def servers_said():
    """For a failed run's report: each server's last requests (the stand-in logs each with its client's address)
    and the gauges a drain waits on."""
    for h in SERVERS:
        said = subprocess.run(["docker", "exec", hosts.container(h), "sh", "-c",
                               "journalctl -q -u sglang -n 15 --no-pager -o short-precise; curl -s -H "
                               f"'Authorization: Bearer {API_KEY}' http://127.0.0.1:30000/metrics"],
                              capture_output=True, text=True)
        print(f"--- {h}: the server's last lines and its gauges\n{said.stdout[-3000:]}{said.stderr[-500:]}")


def commits():
    return sglang_repo.build(paths.sub("git"))


def hub_stats(reset=False):
    """The Hub stand-in's count of what it sent to the fleet's hosts (lab/hub.py), reset first on request. Only
    theirs: Molecule's containers download from the same Hub on the other pytest worker."""
    base = f"http://{engine.bridge_gateway()}:{serve.HTTP_PORT}{hub.PREFIX}/_lab"
    clients = ",".join(hosts.address(h) for h in [*SERVERS, ROUTER])
    if reset:
        urllib.request.urlopen(f"{base}/reset?clients={clients}", timeout=10).read()
    with urllib.request.urlopen(f"{base}/stats?clients={clients}", timeout=10) as r:
        return json.loads(r.read())


def model_link(host):
    out = subprocess.run(["docker", "exec", hosts.container(host), "readlink", "/srv/models/GLM-5-NVFP4"],
                         capture_output=True, text=True)
    return out.stdout.strip()


def marker_time(host, revision):
    """When the host recorded the revision verified (its marker's modification time), seconds since the epoch."""
    out = subprocess.run(["docker", "exec", hosts.container(host), "stat", "-c", "%Y",
                          f"/srv/models/GLM-5-NVFP4.revisions/{revision}/.blackwell-snapshot.json"],
                         capture_output=True, text=True)
    return int(out.stdout.strip()) if out.returncode == 0 else None


class RouterWatch:
    """Polls the router's /workers and keeps, per server, the intervals it was out of the router."""

    def __init__(self):
        self.url = f"http://{hosts.address(ROUTER)}:30000/workers"
        self.servers = {h: f"http://{hosts.address(h)}:30000" for h in SERVERS}
        self.out = {h: [] for h in SERVERS}
        self.since = {}
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                req = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {API_KEY}"})
                with urllib.request.urlopen(req, timeout=5) as r:
                    workers = json.loads(r.read()).get("workers", [])
            except (OSError, ValueError):
                time.sleep(0.2)
                continue
            now = time.time()
            present = {w.get("url", "").rstrip("/") for w in workers}
            for h, url in self.servers.items():
                if url not in present and h not in self.since:
                    self.since[h] = now
                elif url in present and h in self.since:
                    self.out[h].append((self.since.pop(h), now))
            time.sleep(0.2)

    def stop(self):
        self.stop_flag.set()
        self.thread.join(timeout=10)
        return self.out


def current_release(host):
    out = subprocess.run(["docker", "exec", hosts.container(host), "readlink", "/opt/sglang/current"],
                         capture_output=True, text=True)
    return out.stdout.strip()


class Load:
    """lab/loadgen.py through the router, in the background, while a playbook runs: two requests in flight at all
    times (each takes the stand-in's SGLANG_LAB_RESPONSE_SECONDS), about ten a second; more would only spend the CPU
    that the playbook under test shares with them."""

    def __init__(self, tmp_path):
        self.out = tmp_path / "load.json"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lab.loadgen", "--url", f"http://{hosts.address(ROUTER)}:30000",
             "--api-key", API_KEY, "--threads", "2", "--out", str(self.out)], cwd=str(REPO), stdout=subprocess.DEVNULL)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)
        report = json.loads(self.out.read_text())
        print("load:", json.dumps(report, indent=1))
        return report


@pytest.fixture(scope="module")
def fleet():
    def converge():
        # the first host alone, from the Hub (its cache host is not up yet)
        first = fleet_playbook(SITE, "--limit", FIRST, "-e", "nvidia_driver_reboot=true",
                               "-e", "model_weights_cache_url=")
        assert first.returncode == 0, f"site.yml failed on {FIRST} (output above)"

    # the servers start from the run's converged server (the first here, or the fault tests' host:
    # lab/hosts.py, converged_image); site.yml then puts them behind the router
    tag, made_here = hosts.converged_image(FIRST, converge)
    for h in SERVERS[1:] if made_here else SERVERS:
        hosts.start(h, tag, fresh=True)
    hosts.start(ROUTER, os.environ["BLACKWELL_LAB_IMAGE"], fresh=True)
    converged = fleet_playbook(SITE, "-e", "nvidia_driver_reboot=true")
    yield converged
    for h in [*SERVERS, ROUTER]:
        hosts.remove(h)


def test_site_puts_the_fleet_behind_the_router(fleet):
    assert fleet.returncode == 0, "site.yml failed on the fleet (output above)"
    for h in SERVERS:
        assert f"http://{hosts.address(h)}:30000" in fleet.stdout, f"the router does not balance {h}"
    again = fleet_playbook(SITE)
    assert again.returncode == 0
    r = recap(again.stdout)
    assert set(r) == {*SERVERS, ROUTER}
    assert all(v["changed"] == 0 for v in r.values()), "the second site.yml run changed something"
    # each run takes the fleet's lock and leaves none behind
    assert lock_on_router() is None, "site.yml left the fleet's lock behind"


def test_no_process_on_the_fleet_has_the_api_key_in_its_command_line(fleet):
    """Any local user reads /proc/<pid>/cmdline: every process of every host, the servers and the router
    included, is read there, and none holds the key."""
    script = r'for f in /proc/[0-9]*/cmdline; do tr "\000" " " < "$f" 2>/dev/null; echo; done'
    for host, service in [*((h, "sglang.launch_server") for h in SERVERS), (ROUTER, "sglang")]:
        out = subprocess.run(["docker", "exec", hosts.container(host), "sh", "-c", script], capture_output=True,
                             text=True, check=True)
        lines = [line for line in out.stdout.splitlines() if line.strip()]
        assert any(service in line for line in lines), f"no {service} process on {host}: {lines}"
        assert not [line for line in lines if API_KEY in line], f"the API key is on a command line on {host}"


def test_mitogen_strategy_runs_site_as_a_no_op(fleet):
    """The documented mitogen option (README, "Large fleets"): the same site.yml, nothing to change."""
    import ansible_mitogen
    strategy = os.path.join(os.path.dirname(ansible_mitogen.__file__), "plugins", "strategy")
    out = fleet_playbook(SITE, env={"ANSIBLE_STRATEGY_PLUGINS": strategy, "ANSIBLE_STRATEGY": "mitogen_linear"})
    assert out.returncode == 0, "site.yml under mitogen failed (output above)"
    r = recap(out.stdout)
    assert set(r) == {*SERVERS, ROUTER}
    assert all(v["changed"] == 0 and v["failed"] == 0 for v in r.values())


def test_bad_batch_size_stops_before_anything_changes(fleet):
    out = fleet_playbook(REPIN, "-e", "repin_batch_size=3", "-e", f"sglang_commit={commits()['fp4_cudnn_default']}")
    assert out.returncode != 0
    assert "would leave the routers 0 of their 3 servers" in out.stdout and "Nothing was changed" in out.stdout
    assert all(r["changed"] == 0 for r in recap(out.stdout).values())


def test_a_re_pin_on_part_of_the_fleet_is_refused_naming_the_servers_it_lacks(fleet, tmp_path):
    """A slice of the fleet (an automation platform's sliced job hands each slice an inventory of some hosts): the
    inventory without the third server. The router still balances it, so the re-pin stops before any change, naming
    it."""
    hosts_yml = (FLEET / "hosts.yml").read_text()
    sliced = tmp_path / "slice"
    sliced.mkdir()
    (sliced / "group_vars").symlink_to((FLEET / "group_vars").resolve())
    kept = hosts_yml.replace(f"        {THIRD}:\n          ansible_port: {hosts.LAB_HOSTS[THIRD]}\n", "")
    assert kept != hosts_yml
    (sliced / "hosts.yml").write_text(kept)
    before = {h: current_release(h) for h in SERVERS}
    out = run(["ansible-playbook", "-i", sliced, REPIN, "-e", f"sglang_commit={commits()['fp4_cudnn_default']}"],
              timeout=900)
    assert out.returncode != 0
    assert f"{ROUTER} balances http://{hosts.address(THIRD)}:30000;" in out.stdout
    assert "A re-pin needs the whole fleet in one run" in out.stdout and "Nothing was changed." in out.stdout
    assert all(r["changed"] == 0 for r in recap(out.stdout).values())
    assert {h: current_release(h) for h in SERVERS} == before


LOCK = "/var/lib/blackwell-serving/fleet.lock"


def lock_on_router():
    """The fleet's lock file on the router's host, or None."""
    out = subprocess.run(["docker", "exec", hosts.container(ROUTER), "cat", LOCK], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_a_second_fleet_operation_stops_before_any_change_naming_the_first(fleet):
    """A re-pin run from another control node holds the fleet's lock: a second re-pin, and a site.yml run, stop
    before any change, naming it. (That site.yml takes the lock and leaves none behind once it is free is the first
    test's.)"""
    holder = {"controller": "ops-laptop", "pid": 4242, "user": "ops", "playbook": "repin.yml",
              "token": "ops-laptop:4242:1", "since": time.time()}
    subprocess.run(["docker", "exec", "-i", hosts.container(ROUTER), "sh", "-c",
                    f"mkdir -p {os.path.dirname(LOCK)} && cat > {LOCK}"], input=json.dumps(holder), text=True,
                   check=True)
    before = {h: current_release(h) for h in SERVERS}
    try:
        second = fleet_playbook(REPIN, "-e", f"sglang_commit={commits()['fp4_cudnn_default']}")
        site = fleet_playbook(SITE)
    finally:
        subprocess.run(["docker", "exec", hosts.container(ROUTER), "rm", "-f", LOCK], check=True)
    for out, playbook in [(second, "repin.yml"), (site, "site.yml")]:
        assert out.returncode != 0
        assert f"{playbook} stops before any change: the fleet's lock" in out.stdout
        assert "held by repin.yml run by ops on ops-laptop (process 4242)" in out.stdout
        assert all(r["changed"] == 0 for r in recap(out.stdout).values())
    assert {h: current_release(h) for h in SERVERS} == before


def test_repin_rolls_across_the_fleet_under_load(fleet, tmp_path):
    """sglang's commit and the model's revision re-pinned together, under load: the new release and revision are
    staged beside the ones in service before each host leaves the router; the Hub sends the fleet one copy of the
    new revision (the site cache on lab-router-1 fetches it, the servers fetch from it). A second re-pin started
    while it runs is refused, naming it, and no request fails."""
    new = commits()["fp4_cudnn_default"]
    later = hub.HUB.next_sha
    one_copy = sum(len(f.data) for f in hub.model_files(later=True))
    hub_stats(reset=True)
    load = Load(tmp_path)
    watch = RouterWatch()
    started = int(time.time()) - 1
    args = ["-e", f"sglang_commit={new}", "-e", f"model_weights_revision={later}"]
    first = []
    rollout = threading.Thread(target=lambda: first.append(fleet_playbook(REPIN, *args)))
    rollout.start()
    # a second re-pin of the same pins, started once the first holds the fleet's lock: refused before any change
    deadline = time.time() + 900
    while (holder := lock_on_router()) is None and rollout.is_alive() and time.time() < deadline:
        time.sleep(1)
    assert holder is not None, "the re-pin ran without taking the fleet's lock"
    second = fleet_playbook(REPIN, *args)
    rollout.join()
    out = first[0]
    outside = watch.stop()
    report = load.stop()
    sent = hub_stats()
    assert second.returncode != 0 and "repin.yml stops before any change: the fleet's lock" in second.stdout
    assert f"held by repin.yml run by {holder['user']} on {holder['controller']} (process {holder['pid']})" \
        in second.stdout
    assert all(r["changed"] == 0 for r in recap(second.stdout).values()), "the refused re-pin changed something"
    assert out.returncode == 0, "repin.yml failed (output above)"
    assert lock_on_router() is None, "repin.yml left the fleet's lock behind"
    assert report["sent"] > 100 and report["failed"] == 0, f"requests failed during the re-pin: {report['errors']}"
    for h in SERVERS:
        assert os.path.basename(current_release(h)).startswith(new[:12]), f"{h} is not on the new release"
        assert any(k.startswith(f"{h}:") and new[:12] in k for k in report["served_by"]), \
            f"{h} served no request on the new release"
        assert model_link(h).endswith(f"/{later}"), f"{h} does not serve the model revision {later}"
    said = [ln for ln in out.stdout.splitlines() if f"{FIRST}: differs in" in ln]
    assert said and "sglang_commit" in said[0] and "model revision" in said[0], said
    assert sent["sent_total"] == one_copy, f"the Hub sent {sent['sent_total']} bytes, not one copy ({one_copy})"
    figures = {}
    for h in SERVERS:
        assert len(outside[h]) == 1, f"{h} left the router {len(outside[h])} times: {outside[h]}"
        left, back = outside[h][0]
        verified = marker_time(h, later)
        assert verified is not None and verified <= left, f"{h} left the router before its new revision was verified"
        figures[h] = round(back - left, 1)
    print(f"out of the router per host (s): {figures}; Hub bytes sent {sent['sent_total']} (one copy {one_copy})")
    # each host put back carries the servers' API key: the real router warns of a worker added without it (and its
    # own health checks then get 401 from the servers)
    journal = subprocess.run(["docker", "exec", hosts.container(ROUTER), "journalctl", "-q", "-o", "cat",
                              "-u", "sglang-router", "--since", f"@{started}"], capture_output=True, text=True).stdout
    assert "without API key" not in journal, journal[-2000:]
    again = fleet_playbook(REPIN, "-e", f"sglang_commit={new}", "-e", f"model_weights_revision={later}")
    assert again.returncode == 0
    assert all(r["changed"] == 0 for r in recap(again.stdout).values()), "a re-pin to the same pins changed something"
    # back to the stack file's revision for the tests that follow: it was kept on every host for a rollback
    back = fleet_playbook(REPIN, "-e", f"sglang_commit={new}")
    assert back.returncode == 0, "the re-pin back to the pinned model revision failed (output above)"
    assert hub_stats()["sent_total"] == one_copy, "going back to the kept revision downloaded something"
    assert all(model_link(h).endswith(f"/{hub.HUB.sha}") for h in SERVERS)


def test_canary_failure_stops_the_rollout(fleet, tmp_path):
    new = commits()["fp4_cudnn_default"]
    before = {h: current_release(h) for h in SERVERS}
    assert all(new[:12] in r for r in before.values())
    load = Load(tmp_path)
    out = fleet_playbook(REPIN, "-e", f"sglang_commit={commits()['broken_server']}")
    report = load.stop()
    assert out.returncode != 0
    assert f"ROLLOUT STOPPED at {FIRST}" in out.stdout and "healthy and back in the routers" in out.stdout
    # stopped by the broken release itself (its server's own error), not by an earlier step such as the drain
    assert "no kernel image is available" in out.stdout, "the rollout stopped, but not at the broken release's start"
    r = recap(out.stdout)
    assert r[FIRST]["failed"] == 1
    for h in SERVERS[1:]:
        assert r[h]["changed"] == 0 and r[h]["failed"] == 0, f"{h} was touched"
    assert {h: current_release(h) for h in SERVERS} == before
    assert report["failed"] == 0, f"requests failed: {report['errors']}"
    ready = subprocess.run(["docker", "exec", hosts.container(ROUTER), "curl", "-s", "http://127.0.0.1:30000/readiness"],
                           capture_output=True, text=True)
    assert json.loads(ready.stdout)["healthy_workers"] == 3


def test_a_release_that_passes_the_gate_but_fails_verify_is_reverted(fleet, tmp_path):
    """The new release serves (gate passed, recorded as deployed), then verify fails (here: a GPU count the lab
    hosts do not have): the canary goes back to the release, unit and environment that served before. The release
    re-pinned to is the stack file's, which the fleet served before the re-pin test and keeps for a rollback: a switch
    without a build, which is all this path needs."""
    new = commits()["fp4_cudnn_default"]
    before = {h: current_release(h) for h in SERVERS}
    load = Load(tmp_path)
    out = fleet_playbook(REPIN, "-e", "verify_gpu_count=9")
    report = load.stop()
    assert out.returncode != 0
    assert "check gpu_count failed" in out.stdout
    assert f"it was reverted to {os.path.basename(before[FIRST])}" in out.stdout
    assert "healthy and back in the routers" in out.stdout
    assert {h: current_release(h) for h in SERVERS} == before
    deployed = subprocess.run(["docker", "exec", hosts.container(FIRST), "readlink", "/etc/sglang/deployed/release"],
                              capture_output=True, text=True).stdout.strip()
    assert deployed == before[FIRST] and new[:12] in deployed
    assert report["failed"] == 0, f"requests failed: {report['errors']}"


def test_drift_names_the_hand_changed_host_and_only_that(fleet, tmp_path):
    new = commits()["fp4_cudnn_default"]
    subprocess.run(["docker", "exec", hosts.container(SECOND), "sh", "-c",
                    "sed -i 's/--mem-fraction-static 0.9/--mem-fraction-static 0.85/' /etc/systemd/system/sglang.service"
                    " && systemctl daemon-reload"], check=True)
    reports = tmp_path / "reports"  # not there yet: drift.yml makes it
    out = fleet_playbook(DRIFT, "-e", f"sglang_commit={new}", "-e", f"verify_report_dir={reports}")
    assert out.returncode == 2, "drift.yml should fail the host that differs"
    report = json.loads((reports / "drift.json").read_text())
    assert report["drifted"] == [SECOND]
    assert report["hosts"][SECOND] == [
        {"item": "unit flag --mem-fraction-static", "expected": "0.9", "found": "0.85"}]
    assert report["hosts"][FIRST] == [] and report["hosts"][THIRD] == []
    assert f"1 of 3 host(s) differ from the stack file: {SECOND}" in out.stdout
    assert all(r["changed"] == 0 for r in recap(out.stdout).values()), "drift.yml changed something"


VERIFY = REPO / "playbooks" / "verify.yml"
FINGERPRINT = REPO / "playbooks" / "fingerprint.yml"


def _restart_server(host):
    subprocess.run(["docker", "exec", hosts.container(host), "sh", "-c",
                    "systemctl restart sglang && for i in $(seq 60); do "
                    "curl -sf http://127.0.0.1:30000/health >/dev/null && exit 0; sleep 1; done; exit 1"], check=True)


def _reports(path):
    return {h: json.loads((path / f"{h}.json").read_text()) for h in SERVERS}


def _fingerprint_check(report):
    return next(c for c in report["checks"] if c["name"] == "fingerprint")


def test_the_fingerprint_names_the_host_that_computes_garbage(fleet, tmp_path):
    """Three servers on correct kernels agree; one told to corrupt its answers from token 6 on (a lab-only setting
    of the stand-in) still answers /health, and verify names it, where, and with which tokens (issue 17)."""
    new = commits()["fp4_cudnn_default"]
    common = ["-e", f"sglang_commit={new}", "-e", '{"verify_checks": ["fingerprint"]}']
    good = fleet_playbook(VERIFY, *common, "-e", f"verify_report_dir={tmp_path / 'good'}")
    assert good.returncode == 0, "verify's fingerprint failed on a healthy fleet (output above)"
    for h, rep in _reports(tmp_path / "good").items():
        check = _fingerprint_check(rep)
        assert check["ok"] and check["found"].startswith("same tokens as the fleet's majority"), (h, check)
        print(f"fingerprint probe of {h}: {check['probe']}")
    subprocess.run(["docker", "exec", hosts.container(SECOND), "sh", "-c",
                    "mkdir -p /etc/sglang-lab-standin && echo 6 > /etc/sglang-lab-standin/corrupt-from-token"],
                   check=True)
    _restart_server(SECOND)
    try:
        bad = fleet_playbook(VERIFY, *common, "-e", f"verify_report_dir={tmp_path / 'bad'}")
    finally:
        subprocess.run(["docker", "exec", hosts.container(SECOND), "rm", "-rf", "/etc/sglang-lab-standin"],
                       check=True)
        _restart_server(SECOND)
    assert bad.returncode == 2
    reports = _reports(tmp_path / "bad")
    assert [h for h, rep in reports.items() if not rep["passed"]] == [SECOND]
    found = _fingerprint_check(reports[SECOND])["found"]
    assert f"differs from the fleet's majority ({FIRST})" in found and "at token 6: different token" in found
    assert "check fingerprint failed" in bad.stdout


def test_a_re_pin_through_a_garbage_release_stops_at_the_canary(fleet, tmp_path):
    """A reference recorded from a trusted host; a re-pin to a release that passes its health gate but computes
    garbage is stopped at the canary by the fingerprint and rolled back; drift names the stale reference."""
    new = commits()["fp4_cudnn_default"]
    ref_file = tmp_path / "fingerprint.yml"
    rec = fleet_playbook(FINGERPRINT, "-e", f"fingerprint_host={FIRST}", "-e", f"sglang_commit={new}",
                         "-e", f"verify_fingerprint_file={ref_file}", "-e", f"verify_report_dir={tmp_path / 'r'}")
    assert rec.returncode == 0, "playbooks/fingerprint.yml failed (output above)"
    assert "verify_fingerprint_reference:" in ref_file.read_text() and f"recorded_from: {FIRST}" in ref_file.read_text()
    with_ref = ["-e", f"@{ref_file}"]
    ok = fleet_playbook(VERIFY, *with_ref, "-e", f"sglang_commit={new}", "-e", '{"verify_checks": ["fingerprint"]}',
                        "-e", f"verify_report_dir={tmp_path / 'v'}")
    assert ok.returncode == 0
    assert all(_fingerprint_check(r)["found"].startswith("same tokens as the reference")
               for r in _reports(tmp_path / "v").values())
    before = {h: current_release(h) for h in SERVERS}
    out = fleet_playbook(REPIN, *with_ref, "-e", f"sglang_commit={commits()['garbage_kernels']}")
    assert out.returncode != 0
    assert f"ROLLOUT STOPPED at {FIRST}" in out.stdout and "check fingerprint failed" in out.stdout
    assert "at token 4: different token" in out.stdout
    r = recap(out.stdout)
    for h in SERVERS[1:]:
        assert r[h]["changed"] == 0 and r[h]["failed"] == 0, f"{h} was touched"
    assert {h: current_release(h) for h in SERVERS} == before
    drift = fleet_playbook(DRIFT, *with_ref, "-e", f"sglang_commit={commits()['last_flashinfer_063']}",
                           "-e", f"verify_report_dir={tmp_path / 'd'}")
    assert "The reference fingerprint was recorded on another stack (sglang_commit changed since)" in drift.stdout
    assert json.loads((tmp_path / "d" / "drift.json").read_text())["fingerprint_reference_stale"] == ["sglang_commit"]


@needs_lab
def test_a_stopped_server_leaves_the_routers_rotation_within_seconds(fleet):
    """sglang-router (the pinned sglang_router_version) checks its workers' /health every 60 s by default and needs three failures: a dead server
    stayed listed as healthy for minutes. The stack file's health-check settings (5 s, two failures, 5 s timeout)
    take it out within about 15 s; the bound here is the router's own default interval, so that a slow machine does
    not flake it."""
    victim = SERVERS[-1]
    url = f"http://{hosts.address(victim)}:30000"

    def healthy():
        req = urllib.request.Request(f"http://{hosts.address(ROUTER)}:30000/workers",
                                     headers={"Authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            workers = json.loads(r.read()).get("workers", [])
        return [w for w in workers if w.get("url", "").rstrip("/") == url and w.get("is_healthy")]

    assert healthy(), f"{victim} is not healthy behind the router before the test"
    subprocess.run(["docker", "exec", hosts.container(victim), "systemctl", "stop", "sglang.service"], check=True)
    started = time.monotonic()
    try:
        while healthy() and time.monotonic() - started < 60:
            time.sleep(0.5)
        took = time.monotonic() - started
        print(f"{victim} left the rotation {took:.1f} s after its server stopped")
        assert not healthy(), f"the router still lists {victim} as healthy 60 s after its server stopped"
    finally:
        subprocess.run(["docker", "exec", hosts.container(victim), "systemctl", "start", "sglang.service"],
                       check=True)
    back = fleet_playbook(SITE, "--limit", victim)
    assert back.returncode == 0


@needs_lab
def test_an_unreachable_router_is_named_before_anything_is_drained(fleet):
    """The router's host stops answering SSH: the re-pin stops in its first play, naming the router, with every server
    still behind it (the message was about a dict without default_ipv4)."""
    before = {h: current_release(h) for h in SERVERS}
    # and the sessions still open: ssh's connection sharing (ControlPersist) would otherwise reuse an earlier test's
    subprocess.run(["docker", "exec", hosts.container(ROUTER), "sh", "-c",
                    "systemctl stop ssh.service ssh.socket; pkill sshd; true"], capture_output=True)
    try:
        out = fleet_playbook(REPIN, "-e", f"sglang_commit={commits()['fp4_cudnn_default']}")
    finally:
        subprocess.run(["docker", "exec", hosts.container(ROUTER), "systemctl", "start", "ssh.service"], check=True)
    assert out.returncode != 0
    assert f"router {ROUTER} unreachable:" in out.stdout and "Nothing was drained or changed" in out.stdout
    assert "default_ipv4" not in out.stdout and "blackwell.serving.sglang_router : drain |" not in out.stdout
    assert {h: current_release(h) for h in SERVERS} == before


@needs_lab
def test_a_server_left_out_of_the_router_fails_drift_and_verify_until_site_puts_it_back(fleet, tmp_path):
    """What a re-pin killed while a host was drained leaves: the host out of the router. drift and verify name it;
    site.yml's router play puts it back."""
    victim = SERVERS[1]
    url = f"http://{hosts.address(victim)}:30000"
    headers = {"Authorization": f"Bearer {API_KEY}"}
    req = urllib.request.Request(f"http://{hosts.address(ROUTER)}:30000/workers", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        wid = next(w["id"] for w in json.loads(r.read())["workers"] if w["url"].rstrip("/") == url)
    urllib.request.urlopen(urllib.request.Request(f"http://{hosts.address(ROUTER)}:30000/workers/{wid}",
                                                  headers=headers, method="DELETE"), timeout=10)
    time.sleep(2)
    drift = fleet_playbook(DRIFT, "-e", f"verify_report_dir={tmp_path}")
    assert drift.returncode != 0 and "router_membership" in drift.stdout and f"{ROUTER}: not listed" in drift.stdout
    # the tests before leave the fleet on other pins than the stack file's: only the router's view is judged here
    report = json.loads((tmp_path / "drift.json").read_text())
    out_of_router = sorted(h for h, diffs in report["hosts"].items()
                           if any(d["item"] == "router_membership" for d in diffs or []))
    assert out_of_router == [victim]
    verify_out = fleet_playbook(REPO / "playbooks" / "verify.yml", "-e", f"verify_report_dir={tmp_path}")
    assert verify_out.returncode != 0 and f"{victim}: check router_membership failed" in verify_out.stdout
    site = fleet_playbook(SITE)
    assert site.returncode == 0
    assert fleet_playbook(DRIFT, "-e", f"verify_report_dir={tmp_path}").returncode == 0
