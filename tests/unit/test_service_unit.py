"""The production sglang unit: rendered from inventories/production, equal to the golden file, and holding
every flag and variable that GLM-5-NVFP4 needs on 8x RTX PRO 6000 (SM120)."""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import sglang_argv, verify
from conftest import FIXTURES, REPO

GOLDEN = FIXTURES / "golden" / "production-sglang.service"
BIN = Path(sys.executable).parent

ENVIRONMENT = {"NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


@pytest.fixture(scope="module")
def rendered_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    playbook = BIN / "ansible-playbook"
    assert playbook.exists(), f"{playbook} is missing: run the tests through python3 -m lab test"
    proc = subprocess.run([str(playbook), "-i", str(REPO / "inventories" / "production"),
                           str(REPO / "tests" / "render" / "render_unit.yml"), "-e", f"render_dir={out}"],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def rendered(rendered_dir):
    return (rendered_dir / "gpu-node-01.service").read_text()


def exec_start(unit):
    text = unit.replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def test_production_unit_equals_the_golden_file(rendered):
    assert rendered == GOLDEN.read_text(), (
        "the production unit changed; if that is intended, copy the rendered unit over "
        f"{GOLDEN.relative_to(REPO)} (ansible-playbook -i inventories/production tests/render/render_unit.yml "
        "-e render_dir=DIR)")


def test_the_unit_runs_the_options_the_builder_made(rendered_dir):
    """The template only quotes and joins what module_utils/sglang_argv.py built: the unit's command line is that
    argument list, word for word, and reads back (as drift reads a unit) into the same flags."""
    unit = (rendered_dir / "gpu-node-01.service").read_text()
    options = json.loads((rendered_dir / "gpu-node-01.argv.json").read_text())
    argv = exec_start(unit)
    assert argv[:3] == ["/opt/sglang/current/venv/bin/python", "-m", "sglang.launch_server"]
    assert argv[3:] == sglang_argv.flatten(options)
    assert verify.unit_options(unit)["flags"] == sglang_argv.parse_options(sglang_argv.flatten(options))
    flags = [o[0] for o in options]
    assert len(flags) == len(set(flags)), "an option appears twice"


def test_sm120_settings(rendered):
    """What GLM-5-NVFP4 needs on 8x RTX PRO 6000 (the rest of the command line is the golden file's record)."""
    flags = verify.unit_options(rendered)["flags"]
    assert flags["--tp-size"] == "8" and flags["--kv-cache-dtype"] == "bf16"
    assert flags["--quantization"] == "modelopt_fp4" and flags["--fp4-gemm-backend"] == "flashinfer_cudnn"


def test_the_template_writes_no_flag():
    template = (REPO / "roles/sglang_service/templates/sglang.service.j2").read_text()
    assert not re.search(r"'--[a-z]", template), "the unit template names a flag: build it in sglang_argv.py"


def test_no_abbreviated_or_fp8_options(rendered):
    argv = exec_start(rendered)
    assert "--tp" not in argv
    assert not any(a.startswith("fp8") for a in argv)


def test_every_variable_is_in_the_environment(rendered):
    env = dict(line[len("Environment="):].split("=", 1) for line in rendered.splitlines()
               if line.startswith("Environment="))
    for name, value in ENVIRONMENT.items():
        assert env.get(name) == value, f"{name}={env.get(name)!r}, expected {value!r}"
    assert "FLASHINFER_DISABLE_VERSION_CHECK" not in rendered


def with_options(words, out):
    """launch_server's arguments, --config pointed at the options file rendered into out."""
    words = list(words)
    words[words.index("--config") + 1] = str(out / "gpu-node-01.yaml")
    return words


def test_the_lab_standin_parser_takes_the_command_line(tmp_path):
    # the lab's stand-in server defines launch_server's options with exact names only (no prefixes); sglang's own
    # parser is tested in test_unit_flags_real_sglang.py
    proc, out = render_with(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    from lab import sglang_repo
    sys.path.insert(0, str(sglang_repo.STANDIN))
    try:
        import server_args
    finally:
        sys.path.pop(0)
    args = server_args.prepare_server_args(with_options(exec_start(out.read_text())[3:], tmp_path))
    assert args.tp_size == 8 and args.kv_cache_dtype == "bf16" and args.attention_backend == "flashinfer"
    assert args.fp4_gemm_backend == "flashinfer_cudnn" and args.api_key is None


def test_the_unit_is_hardened(rendered):
    for setting in ("NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "DevicePolicy=closed",
                    "CapabilityBoundingSet=", "ProtectHome=yes"):
        assert setting in rendered.splitlines(), setting
    allowed = [ln.split("=", 1)[1] for ln in rendered.splitlines() if ln.startswith("DeviceAllow=")]
    assert allowed and all("nvidia" in a for a in allowed)
    assert sum(1 for a in allowed if a.split()[0].rstrip("0123456789") == "/dev/nvidia") == 8


def render_with(tmp_path, *extra):
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "production"),
                           str(REPO / "tests" / "render" / "render_unit.yml"), "-e", f"render_dir={tmp_path}", *extra],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    return proc, (tmp_path / "gpu-node-01.service")


def test_multi_node_adds_the_three_flags_and_the_standin_parser_takes_them(tmp_path):
    proc, out = render_with(tmp_path, "-e", '{"sglang_service_nnodes": 2, "sglang_service_node_rank": 1, '
                            '"sglang_service_dist_init_addr": "10.0.0.11:5000", "sglang_service_tp_size": 16}')
    assert proc.returncode == 0, proc.stdout[-3000:]
    words = exec_start(out.read_text())
    for flag, value in (("--nnodes", "2"), ("--node-rank", "1"), ("--dist-init-addr", "10.0.0.11:5000"),
                        ("--tp-size", "16")):
        assert words[words.index(flag) + 1] == value
    from lab import sglang_repo
    sys.path.insert(0, str(sglang_repo.STANDIN))
    try:
        import server_args
    finally:
        sys.path.pop(0)
    args = server_args.prepare_server_args(with_options(words[3:], tmp_path))
    assert (args.nnodes, args.node_rank, args.dist_init_addr) == (2, 1, "10.0.0.11:5000")


def test_one_host_has_no_multi_node_flags(rendered):
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(exec_start(rendered))


@pytest.mark.parametrize("extra, says", [
    ({"sglang_service_nnodes": 2, "sglang_service_node_rank": 2, "sglang_service_dist_init_addr": "10.0.0.11:5000",
      "sglang_service_tp_size": 16}, "sglang_service_node_rank"),
    ({"sglang_service_nnodes": 2, "sglang_service_node_rank": 0, "sglang_service_dist_init_addr": "10.0.0.11",
      "sglang_service_tp_size": 16}, "HOST:PORT"),
    ({"sglang_service_nnodes": 2, "sglang_service_node_rank": 0, "sglang_service_dist_init_addr": "10.0.0.11:5000",
      "sglang_service_tp_size": 8}, "tp-size the GPUs of all hosts"),
])
def test_multi_node_preflight_refuses_bad_input(tmp_path, extra, says):
    import json
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "production"),
                           str(REPO / "tests" / "render" / "preflight_service.yml"), "-e", json.dumps(extra)],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert says in proc.stdout and "Nothing was changed" in proc.stdout


@pytest.mark.parametrize("extra, asks", [
    ({}, True),
    # nvidia_driver's preflight read them earlier in the run: its answer stands
    ({"nvidia_driver_gpus_read": {"changed": False, "failed": False}}, False),
    # a registered read that was skipped read nothing
    ({"nvidia_driver_gpus_read": {"changed": False, "skipped": True}}, True),
])
def test_preflight_asks_the_driver_unless_nvidia_driver_did_in_this_run(tmp_path, extra, asks):
    (tmp_path / "config.json").write_text("{}")
    extra = dict(extra, sglang_service_model_path=str(tmp_path))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "production"),
                           str(REPO / "tests" / "render" / "preflight_service.yml"), "-e", json.dumps(extra)],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    task = proc.stdout.split("Ask the driver which GPUs it sees", 1)[1].split("TASK [", 1)[0]
    assert ("ok: [" in task) == asks and ("skipping: [" in task) == (not asks), task


def _preflight(extra):
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "production"),
                           str(REPO / "tests" / "render" / "preflight_service.yml"), "-e", json.dumps(extra)],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("release", [None, "hidden", "link", "other", "pinned"])
def test_preflight_reads_the_releases_and_the_model_in_one_round_trip(tmp_path, release):
    """One host_state read finds the pinned commit's release (a directory COMMIT[:12]-PINS, as find found it)
    whose sglang judges the extra flags, and the model's config.json."""
    commit = "0123456789ab" + "c" * 28
    releases = tmp_path / "home" / "releases"
    releases.mkdir(parents=True)
    (releases / "fedcba987654-11111111").mkdir()
    name = {"hidden": "." + commit[:12] + "-1", "link": commit[:12] + "-link", "other": "fedcba987654-2",
            "pinned": commit[:12] + "-22222222"}.get(release)
    if release == "link":
        (releases / name).symlink_to(releases / "fedcba987654-11111111")
    elif name:
        (releases / name).mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    extra = {"sglang_service_model_path": str(tmp_path / "model"), "sglang_service_home": str(tmp_path / "home"),
             "sglang_commit": commit, "sglang_service_extra_args": ["--some-flag"],
             "nvidia_driver_gpus_read": {"changed": False, "failed": False}}
    proc = _preflight(extra)
    # one read, no find and stat of their own
    assert proc.stdout.count("preflight | The releases built already, the model's directory, and what listens") == 1
    assert "ansible.builtin.find" not in (REPO / "roles" / "sglang_service" / "tasks" / "preflight.yml").read_text()
    task = proc.stdout.split("The extra flags are known to the pinned sglang", 1)[1].split("TASK [", 1)[0]
    if release == "pinned":
        # the flags are judged against that release's tree (here empty: left to the server, and said so)
        assert "included: " in task and f"options accepted by the server of {releases / name}/src" in proc.stdout
    else:
        assert "skipping: [" in task, task
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_preflight_stops_where_the_model_is_missing(tmp_path):
    proc = _preflight({"sglang_service_model_path": str(tmp_path / "nothing"),
                       "nvidia_driver_gpus_read": {"changed": False, "failed": False}})
    assert proc.returncode != 0
    assert "config.json does not exist" in proc.stdout and "Nothing was changed" in proc.stdout
