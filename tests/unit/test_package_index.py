"""package_index (issue 38, point 1): a pinned version that the index uv takes the project from does not offer is
refused before any change. Parsed on real pages of PyPI (tests/fixtures/index/: PEP 691 JSON and PEP 503 HTML of
flashinfer-python), and the module run against two stand-in indexes on loopback, in uv's order."""
from pathlib import Path

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import package_index as pi

from modrun import run_module, serve, serve_in_turn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "index"


@pytest.mark.parametrize("page, kind", [("pypi-flashinfer-python.json", "application/vnd.pypi.simple.v1+json"),
                                        ("pypi-flashinfer-python.html", "text/html")])
def test_pypis_page_in_either_form_names_the_same_versions(page, kind):
    names = pi.filenames((FIXTURES / page).read_text(), kind)
    offered = pi.versions(names, "flashinfer-python")
    assert "0.6.3" in offered and "0.2.1" in offered and "0.2.10" in offered
    assert offered.index("0.2.1") < offered.index("0.2.10") < offered.index("0.6.3"), "versions sort as numbers"
    other = pi.versions(names, "flashinfer-cubin")
    assert other == [], "another project's versions are not this one's"


def test_both_forms_agree():
    from_json = pi.versions(pi.filenames((FIXTURES / "pypi-flashinfer-python.json").read_text(), "application/json"),
                            "flashinfer_python")
    from_html = pi.versions(pi.filenames((FIXTURES / "pypi-flashinfer-python.html").read_text(), "text/html"),
                            "Flashinfer.Python")
    assert from_json == from_html and len(from_json) > 20


@pytest.mark.parametrize("filename, version", [
    ("nvidia_cudnn_cu12-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl", "9.19.0.56"),
    ("nvidia-cudnn-cu12-9.0.0.312.tar.gz", "9.0.0.312"),
    ("transformers-5.2.0-py3-none-any.whl", None),
])
def test_a_file_name_carries_its_version(filename, version):
    assert pi.version_of(filename, "nvidia-cudnn-cu12") == version


def test_the_first_index_that_has_the_project_decides_as_uv_does():
    first = ["nvidia_cudnn_cu12-9.10.2.21-py3-none-any.whl", "nvidia_cudnn_cu12-9.19.0.56-py3-none-any.whl"]
    second = first + ["nvidia_cudnn_cu12-9.8.0.87-py3-none-any.whl"]
    got = pi.judge({"name": "nvidia-cudnn-cu12", "version": "9.8.0.87"}, [("A", first), ("B", second)])
    assert got == {"index": "A", "offered": ["9.10.2.21", "9.19.0.56"], "found": False}
    got = pi.judge({"name": "nvidia-cudnn-cu12", "version": "9.8.0.87"}, [("A", None), ("B", second)])
    assert got["index"] == "B" and got["found"]
    assert pi.judge({"name": "x", "version": "1"}, [("A", None), ("B", None)]) == {
        "index": None, "offered": [], "found": False}


def index(pages):
    """A simple index on loopback (PEP 503 HTML): pages = {project: [file names]}; other projects answer 404."""
    def answer(path):
        project = path.strip("/").rsplit("/", 1)[-1]
        if project not in pages:
            return 404, b""
        return 200, "".join(f'<a href="../../packages/{n}#sha256=00">{n}</a>\n' for n in pages[project]).encode()
    return serve(answer)


def test_the_module_asks_each_index_in_order():
    torch_like = {"nvidia-cudnn-cu12": ["nvidia_cudnn_cu12-9.19.0.56-py3-none-any.whl"]}
    pypi_like = {"nvidia-cudnn-cu12": ["nvidia_cudnn_cu12-9.8.0.87-py3-none-any.whl"],
                 "transformers": ["transformers-5.2.0-py3-none-any.whl", "transformers-4.57.1.tar.gz"]}
    with index(torch_like) as first_url, index(pypi_like) as second_url:
        first, second = first_url + "/simple", second_url + "/simple"
        result = run_module("package_index", {
            "indexes": [first, second],
            "requirements": ["nvidia-cudnn-cu12==9.8.0.87", "transformers==5.2.0", "nvidia-cudnn-cu12==9.19.0.56"]})
    got = {(r["requirement"]): (r["index"], r["found"]) for r in result["requirements"]}
    assert got == {"nvidia-cudnn-cu12==9.8.0.87": (first, False), "transformers==5.2.0": (second, True),
                   "nvidia-cudnn-cu12==9.19.0.56": (first, True)}
    assert result["changed"] is False


def test_an_index_that_cannot_be_read_is_named():
    result = run_module("package_index", {"indexes": ["http://127.0.0.1:9/simple"],
                                          "requirements": ["transformers==5.2.0"], "timeout": 5,
                                          "retries": 1, "retry_delay": 0.1})
    assert result.get("failed") is True
    assert "the package index http://127.0.0.1:9/simple could not be read for transformers" in result["msg"]


def test_a_transient_server_error_is_asked_again_as_uv_does():
    """pypi.org answers 503 at times (a CI run's preflight stopped on one): uv retries such answers, so the module
    asks again (retries, with a short backoff) before it says uv could not install either; a 404 is an answer."""
    page = b'<a href="../../packages/transformers-5.2.0-py3-none-any.whl#sha256=00">x</a>\n'
    with serve_in_turn((503, b"Service Unavailable"), (503, b"Service Unavailable"), (200, page)) as (url, asked):
        result = run_module("package_index", {"indexes": [url + "/simple"], "requirements": ["transformers==5.2.0"],
                                              "retries": 2, "retry_delay": 0.1})
    assert result.get("failed") is not True, result
    assert result["requirements"][0]["found"] and len(asked) == 3


def test_a_server_error_that_stays_is_named_after_the_retries():
    with serve_in_turn((503, b"Service Unavailable")) as (url, asked):
        result = run_module("package_index", {"indexes": [url + "/simple"], "requirements": ["transformers==5.2.0"],
                                              "retries": 1, "retry_delay": 0.1})
    assert result.get("failed") is True and len(asked) == 2
    assert "answered 503 for transformers" in result["msg"] and "asked 2 times" in result["msg"], result["msg"]
