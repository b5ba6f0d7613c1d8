#!/usr/bin/env python3
"""Benchmark: a no-op site.yml over 1 and 4 lab hosts, with and without the mitogen strategy.

For each strategy (linear: ansible.cfg as shipped, SSH with pipelining and control persistence; mitogen:
mitogen_linear from mitogen 0.3.54) and each fleet size it times, side by side in one run, site.yml on
converged hosts (every task runs and changes nothing) and a playbook of 50 bare `stat` tasks on the same
hosts (the floor: what connecting and running a module costs), REPEAT pairs each, and prints the medians
and their ratio. Then, for each strategy, where the no-op run's tasks and time go, per role (a callback,
benchmarks/callback_plugins/role_profile.py), so that the next slow task is visible.

Run it from the repository root: python3 benchmarks/fleet_noop.py. It holds the lab's lock, brings the lab
up itself, converges lab-gpu-1, starts the other hosts from a snapshot of it, and removes them at the end.
While iterating: --hosts 1 --strategy linear --repeat 1 (one host needs no snapshot), and --no-converge when
lab-gpu-1 is already converged by this checkout. Figures, not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import cli, hosts  # noqa: E402

SNAPSHOT = "blackwell-lab/fleet:benchmark"
STAT_PLAY = """---
- name: Fifty bare stat tasks (the floor)
  hosts: gpu_servers
  gather_facts: false
  tasks:
""" + "".join(f"""    - name: Stat {i}
      ansible.builtin.stat:
        path: /etc/hostname
""" for i in range(50))


def inventory(directory: Path, n: int) -> Path:
    inv = directory / f"fleet-{n}"
    inv.mkdir()
    (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    lines = ["all:", "  vars:", "    ansible_host: 127.0.0.1", "    ansible_user: root",
             "    ansible_python_interpreter: /usr/bin/python3",
             "    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
             "    ansible_host_key_checking: false",
             "  children:", "    gpu_servers:", "      hosts:"]
    for i in range(1, n + 1):
        lines += [f"        lab-gpu-{i}:", f"          ansible_port: {hosts.LAB_HOSTS[f'lab-gpu-{i}']}"]
    (inv / "hosts.yml").write_text("\n".join(lines) + "\n")
    return inv


def playbook(env, inv, play, *extra, profile: Path | None = None, noop: bool = True):
    env = dict(env)
    if profile:
        env["ANSIBLE_CALLBACK_PLUGINS"] = str(REPO / "benchmarks" / "callback_plugins")
        env["ANSIBLE_CALLBACKS_ENABLED"] = "role_profile"
        env["BLACKWELL_ROLE_PROFILE"] = str(profile)
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(play), *extra], env=env, cwd=str(REPO),
                          capture_output=True, text=True)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-5000:])
        raise SystemExit(f"{play} over {inv.name} failed")
    if noop and "changed=0" not in proc.stdout or noop and any(
            ln for ln in proc.stdout.splitlines() if " changed=" in ln and " changed=0 " not in ln):
        sys.stdout.write(proc.stdout[-5000:])
        raise SystemExit(f"{play} over {inv.name} changed something: not a no-op. Changed:\n"
                         + "\n".join(changed_tasks(proc.stdout)))
    return took


def changed_tasks(output: str) -> list[str]:
    """Each task that reported changed, with its host and the lines Ansible printed for it (a diff included)."""
    out, task, lines = [], "", []
    for line in output.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [", "PLAY [", "PLAY RECAP")):
            task, lines = line.rstrip(" *"), []
        elif line.startswith("changed: ["):
            out.append(f"{task}: {line}")
            out.extend(f"    {ln}" for ln in lines[-20:])
        else:
            lines.append(line)
    return out or ["(no task printed changed: see the output above)"]


def breakdown(rows: list[dict], top: int) -> str:
    """Per role: tasks started, tasks that ran on some host, skipped, module calls on the hosts (round trips),
    seconds; then the slowest tasks."""
    roles: dict[str, dict] = {}
    for r in rows:
        agg = roles.setdefault(r["role"], {"tasks": 0, "ran": 0, "skipped": 0, "trips": 0, "seconds": 0.0})
        agg["tasks"] += 1
        agg["ran"] += 1 if (r["ok"] or r["changed"] or r["failed"]) else 0
        agg["skipped"] += 1 if not (r["ok"] or r["changed"] or r["failed"]) else 0
        agg["trips"] += r.get("round_trips", 0)
        agg["seconds"] += r["seconds"]
    total = sum(a["seconds"] for a in roles.values())
    out = [f"  {'role':34} {'tasks':>5} {'ran':>4} {'skip':>4} {'trips':>5} {'seconds':>8} {'share':>6}"]
    for name, a in sorted(roles.items(), key=lambda kv: -kv[1]["seconds"]):
        out.append(f"  {name:34} {a['tasks']:>5} {a['ran']:>4} {a['skipped']:>4} {a['trips']:>5} {a['seconds']:>8.1f} "
                   f"{a['seconds'] / total:>6.0%}")
    out.append(f"  {'total':34} {sum(a['tasks'] for a in roles.values()):>5} "
               f"{sum(a['ran'] for a in roles.values()):>4} {sum(a['skipped'] for a in roles.values()):>4} "
               f"{sum(a['trips'] for a in roles.values()):>5} {total:>8.1f}")
    out.append("  (trips: module calls on the hosts, one per host and loop item; set_fact, assert, debug and the like,"
               " and tasks delegated to the controller, make none)")
    out.append(f"  slowest {top} tasks:")
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        out.append(f"  {r['seconds']:6.2f} s  {r.get('round_trips', 0):>3}  {r['role']}: {r['task']}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="1,4", help="fleet sizes, comma-separated (default 1,4; at most 8)")
    ap.add_argument("--strategy", default="linear,mitogen", help="linear, mitogen or both (default both)")
    ap.add_argument("--repeat", type=int, default=3, help="pairs (site.yml, 50 stat) timed per row; medians")
    ap.add_argument("--no-converge", action="store_true", help="lab-gpu-1 is converged already: no first run")
    ap.add_argument("--top", type=int, default=12, help="slowest tasks listed in the breakdown")
    ap.add_argument("--keep", type=Path, help="a directory to keep each run's per-task profile in (JSON)")
    args = ap.parse_args()
    sizes = sorted({int(n) for n in args.hosts.split(",")})
    strategies = [s for s in ("linear", "mitogen") if s in args.strategy.split(",")]
    with cli.lab_lock():
        return run(args, sizes, strategies)


def run(args, sizes, strategies) -> int:
    env = cli.up(["lab-gpu-1"])
    env["PATH"] = f"{env['VIRTUAL_ENV']}/bin:{env['PATH']}"
    envs = {"linear": env}
    if "mitogen" in strategies:
        mitogen = dict(env)
        probe = subprocess.run([f"{env['VIRTUAL_ENV']}/bin/python", "-c",
                                "import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))"],
                               capture_output=True, text=True, check=True)
        mitogen["ANSIBLE_STRATEGY_PLUGINS"] = os.path.join(probe.stdout.strip(), "plugins", "strategy")
        mitogen["ANSIBLE_STRATEGY"] = "mitogen_linear"
        envs["mitogen"] = mitogen
    site = REPO / "playbooks" / "site.yml"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        invs = {n: inventory(tmp, n) for n in sizes}
        if not args.no_converge:
            print("converging lab-gpu-1", flush=True)
            one = invs[1] if 1 in invs else inventory(tmp, 1)
            subprocess.run(["ansible-playbook", "-i", str(one), str(site), "-e", "nvidia_driver_reboot=true"],
                           env=env, cwd=str(REPO), check=True, capture_output=True)
        fleet = max(sizes)
        if fleet > 1:
            print(f"starting lab-gpu-2..{fleet} from a snapshot of lab-gpu-1", flush=True)
            tag = hosts.snapshot("lab-gpu-1", SNAPSHOT)
        try:
            for i in range(2, fleet + 1):
                hosts.start(f"lab-gpu-{i}", tag, fresh=True)
            stat_play = tmp / "stat50.yml"
            stat_play.write_text(STAT_PLAY)
            # one untimed pass: facts cached, SSH masters up, as in any later run; it may change the copies (their
            # weights' files have other inodes and times than the snapshot's marker records: re-verified, re-recorded)
            playbook(env, invs[fleet], site, noop=False)
            rows, profiles = [], {}
            for name in strategies:
                for n in sizes:
                    t_sites, t_stats = [], []
                    for k in range(args.repeat):
                        prof = tmp / f"profile-{name}-{n}-{k}.json"
                        t_sites.append(playbook(envs[name], invs[n], site, profile=prof))
                        t_stats.append(playbook(envs[name], invs[n], stat_play))
                        if n == min(sizes):
                            profiles.setdefault(name, []).append((t_sites[-1], prof))
                    t_site, t_stat = statistics.median(t_sites), statistics.median(t_stats)
                    rows.append((name, n, t_site, t_stat))
                    print(f"  {name:8} {n} host(s): site.yml {t_site:6.1f} s, 50 stat {t_stat:5.1f} s, "
                          f"ratio {t_site / t_stat:.2f}  (runs: {', '.join(f'{t:.1f}' for t in t_sites)} / "
                          f"{', '.join(f'{t:.1f}' for t in t_stats)})", flush=True)
            for name, runs in profiles.items():
                # the breakdown of the median run
                _, prof = sorted(runs)[len(runs) // 2]
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    for _t, each in runs:
                        (args.keep / each.name).write_text(each.read_text())
                print(f"\nwhere the no-op site.yml goes, {name}, {min(sizes)} host(s) (median run):")
                print(breakdown(json.loads(prof.read_text()), args.top))
        finally:
            for i in range(2, fleet + 1):
                hosts.remove(f"lab-gpu-{i}")
            if fleet > 1:
                subprocess.run(["docker", "rmi", "-f", SNAPSHOT], capture_output=True)
    print()
    print(f"no-op site.yml over lab hosts ({os.cpu_count()} CPU control node, forks from ansible.cfg), "
          f"medians of {args.repeat}")
    print(f"{'strategy':8}  {'hosts':>5}  {'site.yml s':>10}  {'50 stat s':>9}  {'site/stat':>9}")
    for name, n, t_site, t_stat in rows:
        print(f"{name:8}  {n:>5}  {t_site:>10.1f}  {t_stat:>9.1f}  {t_site / t_stat:>9.2f}")
    print("\nfor README.md:\n")
    print("| strategy | hosts | no-op site.yml | 50 `stat` | site.yml / 50 `stat` |")
    print("| --- | --- | --- | --- | --- |")
    for name, n, t_site, t_stat in rows:
        label = "linear (ansible.cfg)" if name == "linear" else "mitogen_linear"
        print(f"| {label} | {n} | {t_site:.1f} s | {t_stat:.1f} s | {t_site / t_stat:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
