"""One converged server image a test run (lab/hosts.py, converged_image): the first chain to ask converges its host and
saves it; one that asks meanwhile waits for that converge and starts from the image; a failed converge saves nothing,
and the next chain converges its own. Docker is replaced by a record of what would have been run."""
import threading
import time

import pytest

from lab import hosts


class FakeDocker:
    def __init__(self):
        self.images = set()
        self.started = []
        self.lock = threading.Lock()

    def docker(self, *args, check=True, **_):
        class Done:
            returncode = 0
            stdout = ""
        done = Done()
        if args[:2] == ("image", "inspect"):
            done.returncode = 0 if args[2] in self.images else 1
        return done

    def start(self, host, image, fresh=False):
        with self.lock:
            self.started.append((host, image, fresh))

    def snapshot(self, host, tag):
        with self.lock:
            self.images.add(tag)
        return tag


@pytest.fixture
def fake(monkeypatch, tmp_path):
    fake = FakeDocker()
    monkeypatch.setenv("BLACKWELL_LAB_HOME", str(tmp_path))
    monkeypatch.setenv("BLACKWELL_LAB_IMAGE", "blackwell-lab/host:bare")
    monkeypatch.setenv(hosts.RUN_ID, "run1")
    monkeypatch.setattr(hosts, "docker", fake.docker)
    monkeypatch.setattr(hosts, "start", fake.start)
    monkeypatch.setattr(hosts, "snapshot", fake.snapshot)
    return fake


def test_the_first_converges_and_one_asking_meanwhile_waits_for_its_image(fake):
    converging = threading.Event()
    release = threading.Event()
    got = {}

    def slow_converge():
        converging.set()
        assert release.wait(10)

    first = threading.Thread(target=lambda: got.update(first=hosts.converged_image("lab-gpu-5", slow_converge)))
    first.start()
    assert converging.wait(10)
    second = threading.Thread(target=lambda: got.update(
        second=hosts.converged_image("lab-gpu-2", lambda: pytest.fail("the second converged a host of its own"))))
    second.start()
    time.sleep(0.3)
    assert "second" not in got, "the second did not wait for the first's converge"
    release.set()
    first.join(10)
    second.join(10)
    tag = got["first"][0]
    assert got == {"first": (tag, True), "second": (tag, False)}
    assert tag.startswith(hosts.CONVERGED + ":") and "run1" in tag
    # only the first host was started, fresh and bare; the second's hosts are its caller's to start from the tag
    assert fake.started == [("lab-gpu-5", "blackwell-lab/host:bare", True)]


def test_a_failed_converge_saves_nothing_and_the_next_converges_its_own(fake):
    def failing():
        raise AssertionError("site.yml failed")

    with pytest.raises(AssertionError, match="site.yml failed"):
        hosts.converged_image("lab-gpu-5", failing)
    assert not fake.images
    tag, made = hosts.converged_image("lab-gpu-2", lambda: None)
    assert made and fake.images == {tag}
    assert [h for h, _, _ in fake.started] == ["lab-gpu-5", "lab-gpu-2"]


def test_each_run_has_its_own_image(fake, monkeypatch):
    tag1, _ = hosts.converged_image("lab-gpu-5", lambda: None)
    monkeypatch.setenv(hosts.RUN_ID, "run2")
    tag2, made = hosts.converged_image("lab-gpu-5", lambda: None)
    assert made and tag1 != tag2


@pytest.fixture
def quick(monkeypatch):
    real = time.sleep
    monkeypatch.setattr(hosts.time, "sleep", lambda s: real(0.02))


def test_a_registered_hosts_converge_is_waited_for_and_no_other_converges(fake, quick):
    hosts.register_producer("lab-gpu-1")
    hosts.register_producer("lab-gpu-9")  # the first registration stands
    got = {}
    waiter = threading.Thread(target=lambda: got.update(
        faults=hosts.converged_image("lab-gpu-5", lambda: pytest.fail("the waiter converged a host of its own"))))
    waiter.start()
    threading.Event().wait(0.3)  # (time.sleep is quickened here)
    assert waiter.is_alive() and not fake.started, "the waiter did not wait for the registered converge"
    hosts.publish_converged("lab-gpu-1", True)
    waiter.join(10)
    tag = next(iter(fake.images))
    assert got == {"faults": (tag, False)}
    assert hosts.converged_image("lab-gpu-2", lambda: pytest.fail("converged again")) == (tag, False)


def test_a_failed_registered_converge_lets_the_first_waiter_converge_its_own(fake, quick):
    hosts.register_producer("lab-gpu-1")
    hosts.publish_converged("lab-gpu-1", False)
    tag, made = hosts.converged_image("lab-gpu-5", lambda: None)
    assert made and fake.images == {tag}
    assert fake.started == [("lab-gpu-5", "blackwell-lab/host:bare", True)]


def test_a_producer_that_never_publishes_is_waited_for_a_bounded_time(fake, quick, monkeypatch):
    monkeypatch.setattr(hosts, "PRODUCER_WAIT", 0.2)
    hosts.register_producer("lab-gpu-1")
    tag, made = hosts.converged_image("lab-gpu-5", lambda: None)
    assert made and fake.images == {tag}


def test_the_markers_and_images_go_with_the_run(fake, monkeypatch):
    hosts.register_producer("lab-gpu-1")
    hosts.publish_converged("lab-gpu-1", False)
    removed = []
    monkeypatch.setattr(hosts, "docker", lambda *a, **k: removed.append(a) or type("D", (), {"stdout": "abc\n"})())
    hosts.remove_converged_images()
    assert ("rmi", "-f", "abc") in removed
    assert not list(hosts.paths.sub("run").glob("converged-image.*.*"))
