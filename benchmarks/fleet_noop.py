#!/usr/bin/env python3
"""Benchmark: a no-op site.yml over 1, 4 and 8 lab hosts, with and without the mitogen strategy.

Prints one table: for each strategy (linear: ansible.cfg as shipped, SSH with pipelining and control
persistence; mitogen: mitogen_linear from mitogen 0.3.54) and each fleet size, the wall time of site.yml on
converged hosts (every task runs and changes nothing), its ratio to the one-host time, and the time of a
playbook of 50 bare `stat` tasks on the same hosts (the floor: what connecting and running a module costs).
Run it from the repository root: python3 benchmarks/fleet_noop.py. It brings the lab up itself, converges
lab-gpu-1, starts lab-gpu-2..8 from a snapshot of it, and removes them at the end. Figures, not a test.
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import cli, hosts  # noqa: E402

SIZES = (1, 4, 8)
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
             "    ansible_ssh_private_key_file: \"{{ lookup('ansible.builtin.env', 'BLACKWELL_LAB_SSH_KEY') }}\"",
             "    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
             "    ansible_host_key_checking: false",
             "  children:", "    gpu_servers:", "      hosts:"]
    for i in range(1, n + 1):
        lines += [f"        lab-gpu-{i}:", f"          ansible_port: {hosts.LAB_HOSTS[f'lab-gpu-{i}']}"]
    (inv / "hosts.yml").write_text("\n".join(lines) + "\n")
    return inv


def playbook(env, inv, play, *extra):
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(play), *extra], env=env, cwd=str(REPO),
                          capture_output=True, text=True)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-5000:])
        raise SystemExit(f"{play} over {inv.name} failed")
    if "changed=0" not in proc.stdout or any(
            ln for ln in proc.stdout.splitlines() if " changed=" in ln and " changed=0 " not in ln):
        raise SystemExit(f"{play} over {inv.name} changed something: not a no-op")
    return took


def main() -> int:
    env = cli.up(["lab-gpu-1"])
    env["PATH"] = f"{env['VIRTUAL_ENV']}/bin:{env['PATH']}"
    mitogen = dict(env)
    probe = subprocess.run([f"{env['VIRTUAL_ENV']}/bin/python", "-c",
                            "import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))"],
                           capture_output=True, text=True, check=True)
    mitogen["ANSIBLE_STRATEGY_PLUGINS"] = os.path.join(probe.stdout.strip(), "plugins", "strategy")
    mitogen["ANSIBLE_STRATEGY"] = "mitogen_linear"
    site = REPO / "playbooks" / "site.yml"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        invs = {n: inventory(tmp, n) for n in SIZES}
        print("converging lab-gpu-1, then starting lab-gpu-2..8 from a snapshot of it", flush=True)
        subprocess.run(["ansible-playbook", "-i", str(invs[1]), str(site), "-e", "nvidia_driver_reboot=true"],
                       env=env, cwd=str(REPO), check=True, capture_output=True)
        tag = hosts.snapshot("lab-gpu-1", SNAPSHOT)
        try:
            for i in range(2, max(SIZES) + 1):
                hosts.start(f"lab-gpu-{i}", tag, fresh=True)
            stat_play = tmp / "stat50.yml"
            stat_play.write_text(STAT_PLAY)
            # one untimed pass: facts cached, SSH masters up, as in any later run
            playbook(env, invs[max(SIZES)], site)
            rows = []
            for name, e in (("linear", env), ("mitogen", mitogen)):
                base = None
                for n in SIZES:
                    t_site = playbook(e, invs[n], site)
                    t_stat = playbook(e, invs[n], stat_play)
                    base = base or t_site
                    rows.append((name, n, t_site, t_site / base, t_stat))
                    print(f"  {name:8} {n} host(s): site.yml {t_site:6.1f} s, 50 stat {t_stat:5.1f} s", flush=True)
        finally:
            for i in range(2, max(SIZES) + 1):
                hosts.remove(f"lab-gpu-{i}")
            subprocess.run(["docker", "rmi", "-f", SNAPSHOT], capture_output=True)
    print()
    print(f"no-op site.yml over lab hosts ({os.cpu_count()} CPU control node, forks from ansible.cfg)")
    print(f"{'strategy':8}  {'hosts':>5}  {'site.yml s':>10}  {'x 1 host':>8}  {'50 stat s':>9}")
    for name, n, t_site, ratio, t_stat in rows:
        print(f"{name:8}  {n:>5}  {t_site:>10.1f}  {ratio:>8.2f}  {t_stat:>9.1f}")
    by = {(r[0], r[1]): r for r in rows}
    for n in SIZES:
        print(f"mitogen / linear at {n} host(s): site.yml {by[('mitogen', n)][2] / by[('linear', n)][2]:.2f}, "
              f"50 stat {by[('mitogen', n)][4] / by[('linear', n)][4]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
