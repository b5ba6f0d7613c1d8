"""The server's start-up code keeps the API keys out of its log lines, as sglang 0.5.9 logs them (issue 19, point 4)."""
import subprocess
import sys

from conftest import REPO

STARTUP = REPO / "roles" / "sglang_service" / "files"

# what sglang 0.5.9 does at start: configure its logger, then logger.info(f"{server_args=}") (a dataclass repr),
# and start its scheduler in a spawned process
PROGRAM = r'''
import dataclasses, logging, multiprocessing, sys

@dataclasses.dataclass
class ServerArgs:
    model_path: str = "/srv/models/GLM-5-NVFP4"
    api_key: str = "sekret-key"
    admin_api_key: str = 'it"s-admin'
    port: int = 30000

def child():
    logging.basicConfig(level=logging.INFO, format="child %(message)s", force=True)
    logging.getLogger("scheduler").info("server_args=%r", ServerArgs())

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", stream=sys.stdout, force=True)
    server_args = ServerArgs()
    logging.getLogger("sglang.srt.entrypoints.engine").info(f"{server_args=}")
    logging.getLogger("x").info("api_key is not logged here, port %d", 30000)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=child)
    p.start()
    p.join()
'''


def _run(tmp_path, pythonpath):
    prog = tmp_path / "server.py"
    prog.write_text(PROGRAM)
    env = {"PATH": "/usr/bin:/bin"}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_without_it_the_key_is_logged(tmp_path):
    assert "sekret-key" in _run(tmp_path, None)


def test_with_it_no_key_is_logged_in_the_server_or_its_spawned_processes(tmp_path):
    text = _run(tmp_path, STARTUP)
    assert "sekret-key" not in text and "s-admin" not in text
    assert text.count(", api_key='<redacted>'") == 2 and text.count("admin_api_key='<redacted>'") == 2
    assert "model_path='/srv/models/GLM-5-NVFP4'" in text and "port=30000" in text
    assert "api_key is not logged here, port 30000" in text


def test_a_key_with_both_quotes_and_a_backslash_is_redacted_whole(tmp_path):
    """repr() escapes the quote it wraps the value in: a key holding ' and " and \\ is written as 'a\\'b"c\\\\d'; the
    redaction takes the whole literal, escapes included (issue 38)."""
    key = "k3y'with\"both\\and-more-after"
    prog = PROGRAM.replace('api_key: str = "sekret-key"', f"api_key: str = {key!r}")
    prog_path = tmp_path / "server.py"
    prog_path.write_text(prog)
    out = subprocess.run([sys.executable, str(prog_path)], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(STARTUP)})
    text = out.stdout + out.stderr
    assert out.returncode == 0, out.stderr
    for part in ("k3y", "with", "both", "and-more-after"):
        assert part not in text, text
    assert text.count(", api_key='<redacted>'") == 2
