"""Faults injected into a converged lab host (issue 19): a run killed at each step of the service's deploy
sequence is finished by the next one. The host is the tests' own (inventories/lab-faults), so that they run beside
lab-gpu-1's (tests/conftest.py, LAB_HOST_UNITS): started from the run's one converged server image (lab-gpu-1's
fresh converge where the run has it, else the first chain's: lab/hosts.py, converged_image), then converged with
this inventory."""
import json
import subprocess
import time

import pytest
import yaml

from helpers import REPO, needs_lab, recap, run
from lab import hosts

SITE = REPO / "playbooks" / "site.yml"
SERVICE = REPO / "tests" / "integration" / "playbooks" / "sglang_service.yml"
FAULTS = REPO / "inventories" / "lab-faults"
# the inventory's one server
HOST, = yaml.safe_load((FAULTS / "hosts.yml").read_text())["all"]["children"]["gpu_servers"]["hosts"]
INTERRUPT = {"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "tests" / "integration" / "callbacks"),
             "ANSIBLE_CALLBACKS_ENABLED": "interrupt"}

# Each step of the deploy sequence, named by the task the run is killed before, with what is done by then.
STEPS = {
    # (the options file and the unit are written by one host_files task: a kill between them is one inside it)
    "config_due": "config_write | The start-up code, the options file sglang reads (the API key), and the unit",
    "unit_written": "deploy | Decide whether to restart",                         # the unit, not reloaded
    "reloaded": "restart | Clear the unit's start-limit count",                   # reloaded, not restarted
    "restarted": "started | The unit and environment file",                       # restarted, nothing noted
    "in_gate": "gate | One token from /health_generate",                          # restarted, in the health gate
    "recording": "deploy_restart | Record the release that passed the gate",      # unit and environment recorded
}


def playbook(*args, env=None, timeout=1800):
    return run(["ansible-playbook", "-i", FAULTS, *args], env=env, timeout=timeout)


def on_host(*argv):
    return subprocess.run(["docker", "exec", hosts.container(HOST), *argv], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def converged():
    def converge():
        # rebooted into its driver where a converge left it waiting, so that verify.yml can pass
        proc = playbook(SITE, "-e", "nvidia_driver_reboot=true")
        assert proc.returncode == 0, "site.yml did not converge the lab host (output above)"

    # the run's converged server (this host, or the fleet's first: lab/hosts.py, converged_image), then this inventory
    tag, made_here = hosts.converged_image(HOST, converge)
    if not made_here:
        hosts.start(HOST, tag, fresh=True)
        converge()
    yield
    hosts.remove(HOST)


def server_args():
    props = dict(line.split("=", 1) for line in on_host(
        "systemctl", "show", "sglang.service", "--property", "MainPID,NeedDaemonReload,ActiveState").splitlines())
    argv = on_host("cat", f"/proc/{props['MainPID']}/cmdline").split("\0")
    return props, argv


@needs_lab
@pytest.mark.parametrize("step", list(STEPS))
def test_an_interrupted_run_is_finished_by_the_next(converged, step):
    # a value no other step uses, so that each step has a change to make
    value = f"0.{70 + list(STEPS).index(step)}"
    setting = ["-e", f"sglang_service_mem_fraction_static={value}"]
    killed = playbook(SERVICE, *setting, env={**INTERRUPT, "BLACKWELL_INTERRUPT_AT": STEPS[step]})
    assert killed.returncode == -9, f"the run was not interrupted at {STEPS[step]!r} (output above)"

    again = playbook(SERVICE, *setting)
    assert again.returncode == 0, "the run after the interruption failed (output above)"
    props, argv = server_args()
    assert props["NeedDaemonReload"] == "no" and props["ActiveState"] == "active", props
    assert argv[argv.index("--mem-fraction-static") + 1] == value, f"the server runs {argv}"
    # what last passed the gate is what runs
    for installed, recorded in (("/etc/systemd/system/sglang.service", "/etc/sglang/deployed/sglang.service"),
                                ("/etc/sglang/sglang.yaml", "/etc/sglang/deployed/sglang.yaml")):
        on_host("cmp", installed, recorded)
    assert on_host("readlink", "/etc/sglang/deployed/release") == on_host("readlink", "/opt/sglang/current")

    third = playbook(SERVICE, *setting)
    assert third.returncode == 0 and recap(third.stdout)[HOST]["changed"] == 0, "a third run changed something"


# --- bad inputs: refused in preflight, before anything changes on the host
VERIFY = REPO / "playbooks" / "verify.yml"
PREFLIGHT = REPO / "playbooks" / "preflight.yml"
STATE = ["/etc/systemd/system/sglang.service", "/etc/sglang/sglang.yaml", "/etc/apt/preferences.d",
         "/srv/models/GLM-5-NVFP4/.blackwell-snapshot.json"]


def host_state():
    """Checksums of the unit, environment file, apt pins and model marker, where current points, and the
    server's invocation: any change before the refusal shows here."""
    sums = on_host("sh", "-c", "find " + " ".join(STATE) + " -type f -exec sha256sum {} + | sort")
    props = on_host("systemctl", "show", "sglang.service", "--property", "InvocationID,NeedDaemonReload")
    return sums, on_host("readlink", "/opt/sglang/current"), props


def lab_standin_options():
    from ansible_collections.blackwell.serving.plugins.module_utils import server_args
    return server_args.option_strings((REPO / "lab" / "standins" / "sglang" / "server_args.py").read_text())


BAD_INPUTS = {
    "extra_args_string": (['{"sglang_service_extra_args": "--context-length 4096"}'], "as a list of strings"),
    "extra_args_number": (['{"sglang_service_extra_args": ["--context-length", 4096]}'], "quote numbers"),
    "unknown_flag": (['{"sglang_service_extra_args": ["--no-such-flag"]}'], "--no-such-flag, which the server"),
    "model_path": (["sglang_service_model_path=/srv/no-such-model"], "/srv/no-such-model/config.json does not exist"),
    "driver_version": (["nvidia_driver_version=580.95"], "three numbers"),
    "commit_upper": (["sglang_commit=6154FAA27C2213A43B0DD8EC5A496EAD1213F5B5"], "in upper case"),
    "revision_upper": (["model_weights_revision=16E3DF0DB16062FEF41BEFCFD0463F36F78AF244"], "in upper case"),
    # rows of the known-bad table (plugins/module_utils/known_bad.py)
    "known_bad_moe_runner": (["sglang_service_moe_runner_backend=flashinfer_cutlass"],
                             "flashinfer-cutlass-moe-sm120-race"),
    "known_bad_cudnn": (["sglang_cudnn_version=9.10.2.21"], "cudnn-fp4-gemm-below-9.15"),
    "known_bad_kv_cache": (["sglang_service_kv_cache_dtype=fp8_e4m3"], "fp8-kv-cache-sm120"),
    # a port another process holds (the lab host's sshd), and a key no HTTP header can carry
    "port_in_use": (["sglang_service_port=22"], "sglang_service_port 22 is taken on the host by sshd"),
    "api_key_newline": (['{"sglang_service_api_key": "lab-key\\nsecond-line"}'], "control character"),
}


@needs_lab
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_refused_before_any_change(converged, case):
    if case == "unknown_flag" and not lab_standin_options():
        pytest.skip("the lab's sglang tree defines its options without add_argument literals (the stand-in); "
                    "the real server_args.py (tests/unit/test_server_options.py) is checked without the lab")
    extra, says = BAD_INPUTS[case]
    before = host_state()
    proc = playbook(SITE, *[a for e in extra for a in ("-e", e)])
    assert proc.returncode != 0, f"{case} was not refused (output above)"
    assert says in proc.stdout and "Nothing was changed" in proc.stdout, f"{case}: the refusal does not say why"
    assert "Preflight, before anything changes" in proc.stdout and "PLAY [NVIDIA driver" not in proc.stdout
    assert host_state() == before, f"{case} changed the host before it was refused"


@needs_lab
def test_numbers_from_the_command_line_are_numbers(converged):
    """-e gives strings: the old checks compared a string with a number and stopped with a Jinja type error."""
    proc = playbook(PREFLIGHT, "-e", "model_weights_free_space_margin_gib=10", "-e", "sglang_releases_keep=2",
                    "-e", "model_weights_download_timeout=3600")
    assert proc.returncode == 0, "preflight.yml failed on numbers given with -e (output above)"


# --- secrets: none in any log, at any verbosity
MODEL = "/srv/models/GLM-5-NVFP4"
SHARD = "model-00002-of-00003.safetensors"


def lab_secrets():
    import yaml
    lab_vars = yaml.safe_load((REPO / "inventories" / "lab" / "group_vars" / "all" / "lab.yml").read_text())
    return {"API key": lab_vars["sglang_service_api_key"], "HF token": lab_vars["model_weights_token"]}


@needs_lab
def test_no_secret_in_any_log_after_a_converge_and_a_verify(converged, tmp_path):
    # the host's journal from here on (the lab host may have served runs of older code before)
    since = "@" + on_host("date", "+%s").strip()
    # the token is used only by a download: cut a shard short and drop the marker, as an interrupted one leaves them
    on_host("sh", "-c", f"truncate -s 1000 {MODEL}/{SHARD} && rm -f {MODEL}/.blackwell-snapshot.json")
    site = playbook(SITE, "-vvv")
    assert site.returncode == 0, "site.yml -vvv failed (output above)"
    assert "downloading" in site.stdout, "no download ran, so the token was not used"
    verify = playbook(VERIFY, "-vvv", "-e", f"verify_report_dir={tmp_path}")
    assert verify.returncode == 0, "verify.yml -vvv failed (output above)"
    journal = on_host("journalctl", "--no-pager", "--output", "verbose", "--since", since)
    assert "ansible-" in journal, "the journal holds no module invocations: nothing to judge"
    found = []
    for what, secret in lab_secrets().items():
        for where, text in (("site.yml -vvv", site.stdout + site.stderr),
                            ("verify.yml -vvv", verify.stdout + verify.stderr), ("the host's journal", journal)):
            # which fields or lines carry it (in the journal, _CMDLINE: the secret is in a process's argv)
            carriers = sorted({line.strip().split("=", 1)[0][:60] for line in text.splitlines() if secret in line})
            if carriers:
                found.append(f"{what} in {where} ({', '.join(carriers[:5])})")
    assert not found, f"secrets exposed: {found}"


# --- corrupt weights fail verify, naming the file
def flip_byte_keeping_mtime(path, offset=4096):
    on_host("python3", "-c", f"""
import json
import os
p = {path!r}
st = os.stat(p)
with open(p, "r+b") as fh:
    fh.seek({offset}); b = fh.read(1); fh.seek({offset}); fh.write(bytes([b[0] ^ 0xFF]))
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
""")


@needs_lab
def test_weights_corrupted_in_place_fail_verify_naming_the_file(converged, tmp_path):
    shard = f"{MODEL}/{SHARD}"
    flip_byte_keeping_mtime(shard)
    try:
        proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}")
        assert proc.returncode != 0, "verify.yml passed a host with a corrupted shard (output above)"
        assert "check model_weights failed" in proc.stdout and f"wrong content: {SHARD}" in proc.stdout
        rehash = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", "verify_model_rehash=true",
                          "-e", "verify_model_progress_interval=1", "-e", '{"verify_checks": ["model"]}')
        assert rehash.returncode != 0 and f"wrong content: {SHARD}" in rehash.stdout
        assert "GLM-5-NVFP4 re-hash: finished after" in rehash.stdout, "the full re-hash said nothing"
    finally:
        flip_byte_keeping_mtime(shard)
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["model"]}')
    assert proc.returncode == 0, "verify.yml failed on the restored shard (output above)"


# --- a system library the server's compiled extensions need: missing, named by the start and by verify, put back
@needs_lab
def test_a_host_without_libnuma_fails_start_and_verify_naming_it_and_site_puts_it_back(converged, tmp_path):
    """sgl-kernel's extension needs libnuma.so.1 (the real wheel's DT_NEEDED, which the lab's stand-in carries):
    without the package the server dies at import and verify names the library and the package; site.yml
    installs it again and the server serves."""
    since = on_host("date", "+%Y-%m-%d %H:%M:%S").strip()
    on_host("dpkg", "--remove", "--force-depends", "libnuma1")
    try:
        try:
            on_host("systemctl", "restart", "sglang.service")
        except subprocess.CalledProcessError:
            pass  # the unit may report the failed start here already
        # the server dies at import, seconds after its start (more on a loaded machine): wait for it, bounded
        deadline = time.monotonic() + 120
        while True:
            journal = on_host("journalctl", "--no-pager", "-u", "sglang.service", "--since", since)
            if "Could not load any common_ops library" in journal or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert "libnuma.so.1" in journal and "Could not load any common_ops library" in journal, journal[-2000:]
        proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["sglang"]}')
        assert proc.returncode != 0, "verify.yml passed a host without libnuma1 (output above)"
        assert "check native_libraries failed" in proc.stdout and "libnuma.so.1" in proc.stdout
        assert "package libnuma1 (Debian family)" in proc.stdout
    finally:
        site = playbook(SITE)
    assert site.returncode == 0, "site.yml did not bring the host back (output above)"
    assert "install ok installed" in on_host("dpkg-query", "-W", "-f", "${Status}", "libnuma1")
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}")
    assert proc.returncode == 0, "verify.yml failed after site.yml put libnuma1 back (output above)"


# --- a model revision the Hub does not know: refused before the layout changes, naming the variable
@needs_lab
def test_a_revision_the_hub_does_not_know_is_refused_before_the_layout_changes(converged):
    def layout():
        return (host_state(), on_host("sh", "-c", f"ls -la {MODEL}.revisions/; readlink {MODEL} {MODEL}.rollback || true"))

    before = layout()
    proc = playbook(SITE, "-e", "model_weights_revision=" + "1" * 40)
    assert proc.returncode != 0, "a revision the Hub does not know was not refused (output above)"
    assert f"model_weights_revision {'1' * 40} is not a revision that" in proc.stdout and "404" in proc.stdout
    assert "Nothing was changed" in proc.stdout and "PLAY [NVIDIA driver" not in proc.stdout
    assert layout() == before, "the layout changed before the refusal"
    assert recap(proc.stdout)[HOST]["changed"] == 0
    # an empty directory of that revision (as an interrupted run, or an older version of the collection, leaves
    # one) is no proof that the Hub knows it
    on_host("mkdir", f"{MODEL}.revisions/{'2' * 40}")
    try:
        proc = playbook(SITE, "-e", "model_weights_revision=" + "2" * 40)
        assert proc.returncode != 0 and f"model_weights_revision {'2' * 40} is not a revision that" in proc.stdout
        assert recap(proc.stdout)[HOST]["changed"] == 0
    finally:
        on_host("rmdir", f"{MODEL}.revisions/{'2' * 40}")


# --- a server option value the pinned tree's parser refuses: refused before the unit changes, naming the variable
@needs_lab
def test_an_option_value_the_server_refuses_is_refused_before_the_unit_changes(converged):
    before = host_state()
    proc = playbook(SITE, "-e", "sglang_service_attention_backend=flashinfer2")
    assert proc.returncode != 0, "an attention backend sglang does not have was not refused (output above)"
    assert "sglang_service_attention_backend=flashinfer2 (--attention-backend: not one of" in proc.stdout
    assert "Nothing was changed" in proc.stdout and "restart | Restart the service" not in proc.stdout
    assert host_state() == before, "the host changed before the refusal"
    assert recap(proc.stdout)[HOST]["changed"] == 0


# --- a rollback is judged by the unit it restored, not by the settings of the change that failed
@needs_lab
def test_a_failed_deploy_that_moved_the_port_rolls_back_and_says_healthy(converged):
    from lab import paths, sglang_repo
    broken = sglang_repo.build(paths.sub("git"))["broken_server"]
    serving = on_host("readlink", "/opt/sglang/current")
    started = time.monotonic()
    proc = playbook(SITE, "-e", f"sglang_commit={broken}", "-e", "sglang_service_port=30007")
    took = time.monotonic() - started
    assert proc.returncode != 0, "a release that does not come up was not refused (output above)"
    assert "ROLLED BACK" in proc.stdout and "and is healthy" in proc.stdout, "the rollback was not reported healthy"
    assert "no kernel image is available" in proc.stdout, "the failure does not give the server's own error"
    assert on_host("readlink", "/opt/sglang/current") == serving
    props, argv = server_args()
    assert props["ActiveState"] == "active" and argv[argv.index("--port") + 1] == "30000"
    # the rollback's gate asked the restored port at once, not the failed one until its timeout (120 s in the lab)
    print(f"site.yml with the failing release and port: {took:.0f} s")
    assert playbook(SITE).returncode == 0


# --- a commit the remote lacks, a version no index offers: the run stops before any change, naming the variable;
# a version the index uv takes the package from lacks (uv's first-index: the lab's stand-in of PyTorch's index has
# nvidia-cudnn-cu12, at other versions than PyPI) is refused by the preflight, before any change
@needs_lab
@pytest.mark.parametrize("extra, says", [
    # the converged host has git: the preflight asks the remote (git daemon, protocol v2), which answers "not our ref"
    (["sglang_commit=" + "ab" * 20], "sglang_commit " + "ab" * 20 + " is not a commit that"),
    (["sglang_transformers_version=99.0.0"],
     "sglang_transformers_version 99.0.0 (transformers) is not offered by https://pypi.org/simple"),
    (["sglang_cudnn_version=9.16.0.29"],
     "sglang_cudnn_version 9.16.0.29 (nvidia-cudnn-cu12) is not offered by http://lab-mirror:8680/simple, the index uv"
     " takes nvidia-cudnn-cu12 from"),
])
def test_a_pin_that_cannot_be_had_names_its_variable_and_leaves_current(converged, extra, says):
    serving = on_host("readlink", "/opt/sglang/current")
    releases = on_host("ls", "/opt/sglang/releases")
    proc = playbook(SITE, *[a for e in extra for a in ("-e", e)])
    assert proc.returncode != 0 and says in proc.stdout, "the failure does not name the variable (output above)"
    assert on_host("readlink", "/opt/sglang/current") == serving
    assert on_host("ls", "/opt/sglang/releases") == releases, "a failed release was left behind"
    assert "Nothing was changed" in proc.stdout
    assert all(r["changed"] == 0 for r in recap(proc.stdout).values()), "the refusal came after a change"


# --- persistence off (nvidia-persistenced stopped, as a distribution's --no-persistence-mode unit leaves it)
@needs_lab
def test_persistence_off_fails_verify_naming_the_gpus_and_site_turns_it_back_on(converged, tmp_path):
    on_host("systemctl", "stop", "nvidia-persistenced")
    try:
        proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["gpu"]}')
        assert proc.returncode != 0 and "check persistence_mode failed" in proc.stdout
        assert "GPU 0 (" in proc.stdout and "Disabled" in proc.stdout
    finally:
        site = playbook(SITE)
    assert site.returncode == 0, "site.yml did not bring persistence back (output above)"
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["gpu"]}')
    assert proc.returncode == 0, "verify.yml failed after site.yml (output above)"


# --- a drop-in (systemctl edit) that changes the server's environment: drift reads the unit as systemd runs it
@needs_lab
def test_drift_names_a_drop_in_that_changes_the_environment(converged, tmp_path):
    drift = REPO / "playbooks" / "drift.yml"
    on_host("sh", "-c", "mkdir -p /etc/systemd/system/sglang.service.d && printf '[Service]\\nEnvironment=NCCL_P2P_LEVEL=NVL\\n'"
                        " > /etc/systemd/system/sglang.service.d/override.conf && systemctl daemon-reload")
    try:
        proc = playbook(drift, "-e", f"verify_report_dir={tmp_path}")
        assert proc.returncode != 0, "drift.yml found nothing (output above)"
        assert "unit environment NCCL_P2P_LEVEL" in proc.stdout and "unit drop-ins" in proc.stdout
        assert "/etc/systemd/system/sglang.service.d/override.conf" in proc.stdout
    finally:
        on_host("sh", "-c", "rm -rf /etc/systemd/system/sglang.service.d && systemctl daemon-reload")
    assert playbook(drift, "-e", f"verify_report_dir={tmp_path}").returncode == 0


# --- a shard corrupted in place (same size): site.yml fetches that file again and restarts the server on it
@needs_lab
def test_a_shard_corrupted_in_place_is_fetched_again_by_site_and_the_server_restarted(converged, tmp_path):
    """Only that file is downloaded again (the other shards keep their inodes); the server, which may have loaded
    the bad copy, restarts once; the next run changes nothing; verify passes."""
    shard, other = f"{MODEL}/{SHARD}", f"{MODEL}/model-00001-of-00003.safetensors"
    good = on_host("sha256sum", shard).split()[0]
    other_inode = on_host("stat", "-c", "%i", other)
    pid = server_args()[0]["MainPID"]
    flip_byte_keeping_mtime(shard)
    assert on_host("sha256sum", shard).split()[0] != good
    try:
        # check mode names the file and changes nothing (its verify play fails: the host serves a bad copy now)
        check = playbook(SITE, "--check")
        assert f"{SHARD} in " in check.stdout and "a run removes it and fetches it again" in check.stdout
        assert on_host("sha256sum", shard).split()[0] != good, "check mode changed the shard"
        site = playbook(SITE)
    finally:
        # leave the host as the tests that follow expect it, whatever failed above
        now = subprocess.run(["docker", "exec", hosts.container(HOST), "sha256sum", shard], capture_output=True,
                             text=True).stdout.split()[:1]
        if now and now != [good]:
            flip_byte_keeping_mtime(shard)
    assert site.returncode == 0, "site.yml did not repair the shard (output above)"
    assert f"{SHARD} in " in site.stdout and "(corrupted on disk): removed, and fetched again" in site.stdout
    assert on_host("sha256sum", shard).split()[0] == good
    assert on_host("stat", "-c", "%i", other) == other_inode, "a good shard was downloaded again"
    assert server_args()[0]["MainPID"] != pid, "the server was not restarted on the repaired shard"
    assert ".blackwell-repairs.json changed since it was started" in site.stdout
    again = playbook(SITE)
    assert again.returncode == 0 and all(r["changed"] == 0 for r in recap(again.stdout).values())
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["model"]}')
    assert proc.returncode == 0, "verify.yml failed on the repaired shard (output above)"


# --- a distribution's driver already there (issue 32, point 1): Debian's own nvidia-kernel-common from the real
# archive's contrib, and a distribution's headless 550 set (the lab's stand-in archive), installed by apt from
# their repositories beside the converged host's NVIDIA packages
FOREIGN_SOURCES = "/etc/apt/sources.list.d/lab-foreign-driver.list"
FOREIGN_KEY = "/etc/apt/keyrings/lab-standin-archive.asc"


def foreign_installed():
    """The installed packages of the distribution's driver: {name: version}."""
    listed = on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\n")
    return {ln.split()[0]: ln.split()[1] for ln in listed.splitlines()
            if ln.endswith(" installed") and (ln.startswith("nvidia-kernel-common ") or "-550" in ln.split()[0])}


@needs_lab
def test_a_distribution_driver_is_refused_or_purged_in_the_pins_transaction(converged, tmp_path):
    from lab import aptrepo, image
    mirror, _ = image.host_debian_mirrors()
    try:
        # the stand-in archive is signed with the lab's key, which its own keyring here holds; Debian's archive entry
        # names the keyring the image's entry for it does: apt refuses one source with two different Signed-By values
        # ("Conflicting values set for option Signed-By")
        on_host("python3", "-c", "import urllib.request, sys; open(sys.argv[2], 'wb').write(urllib.request.urlopen("
                                 "sys.argv[1], timeout=30).read())", aptrepo.REPO_URL + aptrepo.KEY_FILE, FOREIGN_KEY)
        on_host("sh", "-c", f"printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {mirror} bookworm"
                            f" contrib\\ndeb [signed-by={FOREIGN_KEY}] {aptrepo.ARCHIVE_URL} /\\n' > {FOREIGN_SOURCES}"
                            " && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
                            " --no-install-recommends nvidia-kernel-common nvidia-headless-550 >/dev/null")
        before = foreign_installed()
        assert before.get("nvidia-kernel-common") == "20220217+3~deb12u1" and "nvidia-headless-550" in before
        # the real answer of apt-cache policy on this host, kept beside the parser's test as a fixture
        names = sorted(before) + ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi"]
        (tmp_path / "policy.txt").write_text(on_host("env", "LC_ALL=C", "apt-cache", "policy", *names))
        print(f"apt-cache policy captured in {tmp_path / 'policy.txt'}")
        dpkg_before = on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n")
        pref = on_host("cat", "/etc/apt/preferences.d/blackwell-nvidia-driver.pref")

        refused = playbook(SITE, "-e", "nvidia_driver_foreign_packages=refuse")
        assert refused.returncode != 0, "a distribution's driver was not refused (output above)"
        for name, version in before.items():
            assert f"{name} {version} (from " in refused.stdout, f"{name} is not named with its origin"
        assert "bookworm/contrib" in refused.stdout and aptrepo.ARCHIVE_PATH in refused.stdout
        assert "Nothing was changed (nvidia_driver_foreign_packages=refuse)" in refused.stdout
        assert on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n") == dpkg_before
        assert on_host("cat", "/etc/apt/preferences.d/blackwell-nvidia-driver.pref") == pref

        plan = playbook(REPO / "playbooks" / "preflight.yml", "--check")
        assert plan.returncode == 0 and "a run replaces these driver packages" in plan.stdout
        assert "nvidia-kernel-common 20220217+3~deb12u1 (from " in plan.stdout and "; purged)" in plan.stdout
        assert all(f"{name} {version} (from " in plan.stdout for name, version in before.items())

        replaced = playbook(SITE)
        assert replaced.returncode == 0, "site.yml did not replace the distribution's driver (output above)"
        assert foreign_installed() == {}, "a package of the distribution's driver is still installed"
        pinned = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())["nvidia_driver_version"]
        held = on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n",
                       "nvidia-driver-cuda", "nvidia-kernel-open-dkms")
        assert all(f" {pinned}-1 hi" in ln for ln in held.splitlines()), held
        again = playbook(SITE)
        assert again.returncode == 0 and all(r["changed"] == 0 for r in recap(again.stdout).values())
        proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["gpu"]}')
        assert proc.returncode == 0, "verify.yml failed after the distribution's driver was replaced (output above)"
    finally:
        # leave the host as the tests that follow expect it, whatever failed above
        left = " ".join(["nvidia-kernel-common"] + [d.name for d in aptrepo.distribution_debs()])
        subprocess.run(["docker", "exec", hosts.container(HOST), "sh", "-c",
                        f"DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq {left} >/dev/null 2>&1;"
                        f" rm -f {FOREIGN_SOURCES} {FOREIGN_KEY}; apt-get update -qq"], capture_output=True)


# --- a running kernel whose headers the archive has dropped (issue 32, point 2): the lab host's own kernel headers
# package removed (the lab's repository never had it), the headers metapackage still offered. A re-pin would have DKMS
# build the new release for the running kernel: stopped. The pinned module loaded already: nothing to build, no stop.
@needs_lab
def test_a_running_kernel_without_headers_stops_before_any_change_naming_it(converged):
    release = on_host("uname", "-r").strip()
    package = f"linux-headers-{release}"
    # dpkg's record of the package, kept to put back byte for byte
    on_host("sh", "-c", f"cd / && tar -cf /tmp/headers-backup.tar var/lib/dpkg/status usr/src/{package}"
                        f" lib/modules/{release}/build $(ls var/lib/dpkg/info/{package}.* | sed 's,^/,,')")
    on_host("dpkg", "--remove", "--force-depends", package)
    try:
        dpkg_before = on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n")
        proc = playbook(SITE, "-e", "nvidia_driver_reboot=false", "-e", "nvidia_driver_version=580.105.08")
        assert proc.returncode != 0, "site.yml went on without the running kernel's headers (output above)"
        assert f"the running kernel {release} has no headers package any more" in proc.stdout
        assert "Nothing was changed" in proc.stdout and "nvidia_driver_reboot=true" in proc.stdout
        assert on_host("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n") == dpkg_before
        # the pinned module loaded, not allowed to reboot: DKMS has nothing to build for the running kernel; and the
        # package the archive dropped is not asked for (apt would stop at "Unable to locate package")
        kept = playbook(SITE, "-e", "nvidia_driver_reboot=false")
        assert kept.returncode == 0, "site.yml stopped, or asked for the running kernel's headers (output above)"
        assert all(r["changed"] == 0 for r in recap(kept.stdout).values())
    finally:
        subprocess.run(["docker", "exec", hosts.container(HOST), "sh", "-c",
                        "cd / && tar -xf /tmp/headers-backup.tar && rm -f /tmp/headers-backup.tar"], check=True)
    assert on_host("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", package).strip() == "ii"


# --- the PCIe fabric (issue 34): what the driver role applies, and what verify's fabric group reads, through the lab's
# stand-ins (the boot loader's command line, /sys/module, lspci and setpci, nvidia-smi -q, the kernel's messages)
FABRIC_CHECKS = ["iommu_mode", "kernel_arg pcie_aspm", "kernel_arg pcie_port_pm",
                 "module_param nvidia_uvm.uvm_disable_hmm", "acs_redirect", "pcie_link_width", "xid"]


def fabric_report(tmp_path):
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}", "-e", '{"verify_checks": ["fabric"]}')
    report = json.loads((tmp_path / f"{HOST}.json").read_text())
    return proc, {c["name"]: c for c in report["checks"]}


@needs_lab
def test_the_fabric_the_driver_applied_passes_verify(converged, tmp_path):
    # converged and rebooted: the command line, the module parameter and ACS are what the role set
    assert "iommu=pt" in on_host("cat", "/proc/cmdline") and "pcie_aspm=off" in on_host("cat", "/proc/cmdline")
    proc, checks = fabric_report(tmp_path)
    assert set(FABRIC_CHECKS) <= set(checks)
    assert proc.returncode == 0 and all(c["ok"] for c in checks.values()), [c for c in checks.values() if not c["ok"]]
    assert on_host("systemctl", "is-enabled", "blackwell-pcie-acs.service").strip() == "enabled"
    # the power limit the stack file sets, applied at boot by the devices unit
    assert on_host("cat", "/run/lab-nvidia-power-limit").strip() == "300.00"


@needs_lab
def test_acs_redirect_on_a_bridge_fails_verify_naming_the_gpu_and_site_clears_it(converged, tmp_path):
    on_host("setpci", "-s", "0000:10:01.1", "ECAP_ACS+6.w=001d")
    proc, checks = fabric_report(tmp_path)
    assert proc.returncode != 0 and not checks["acs_redirect"]["ok"]
    assert checks["acs_redirect"]["found"] == "GPU 1 (00000000:11:00.0): bridge 0000:10:01.1 ACSCtl ReqRedir+ CmpltRedir+"
    site = playbook(SITE)
    assert site.returncode == 0 and recap(site.stdout)[HOST]["changed"] > 0
    assert on_host("setpci", "-s", "0000:10:01.1", "ECAP_ACS+6.w").strip() == "0011"
    _, checks = fabric_report(tmp_path)
    assert checks["acs_redirect"]["ok"], checks["acs_redirect"]


@needs_lab
def test_a_narrowed_link_fails_verify_naming_the_gpu(converged, tmp_path):
    on_host("python3", "-c", "import sys; sys.path.insert(0, '/usr/lib/lab-standin'); import json, pci; "
                             "s = pci._load(); s.setdefault('width', {})['0000:31:00.0'] = 8; "
                             "open(pci.STATE, 'w').write(json.dumps(s))")
    try:
        proc, checks = fabric_report(tmp_path)
        assert proc.returncode != 0 and not checks["pcie_link_width"]["ok"]
        assert checks["pcie_link_width"]["found"] == "GPU 3 (00000000:31:00.0): x8 of x16"
    finally:
        on_host("python3", "-c", "import sys; sys.path.insert(0, '/usr/lib/lab-standin'); import json, pci; "
                                 "s = pci._load(); s.get('width', {}).pop('0000:31:00.0', None); "
                                 "open(pci.STATE, 'w').write(json.dumps(s))")
    assert fabric_report(tmp_path)[1]["pcie_link_width"]["ok"]


@needs_lab
def test_a_fallen_card_in_the_kernel_log_fails_verify_naming_the_gpu(converged, tmp_path):
    xid = "[ 8812.123456] NVRM: Xid (PCI:0000:81:00): 79, pid=2291, name=python3, GPU has fallen off the bus.\n"
    on_host("sh", "-c", f"printf '%s' '{xid}' >> /run/lab-standin-kmsg")
    try:
        proc, checks = fabric_report(tmp_path)
        assert proc.returncode != 0 and not checks["xid"]["ok"]
        assert "GPU 4 (00000000:81:00.0)" in checks["xid"]["found"] and "79" in checks["xid"]["found"]
    finally:
        on_host("rm", "-f", "/run/lab-standin-kmsg")
    assert fabric_report(tmp_path)[1]["xid"]["ok"]
