"""One source for every platform (issue 35, point 5): the collection's meta/platforms.yml is what each role's platform
check accepts, what its message names, the preflight role's default and every role's galaxy_info.platforms. A
distribution a role knows at a version the table does not name stops before any change, instead of taking the
variables of the distribution's other versions; adding the version to the table is what makes it accepted (the walk
in roles/preflight/README.md, "Adding a platform").

The roles' checks run through ansible-playbook on this machine, with the host's platform facts faked (task variables
over the gathered ones); the walk runs them against a copy of the collection whose table names Ubuntu 26.04."""
import json
import shutil

import pytest
import yaml

from conftest import REPO, run_local_playbook
from tools import role_platforms

TABLE = REPO / "meta" / "platforms.yml"
PLATFORMS = role_platforms._platforms_module()
FACTS = {
    "ubuntu2404": {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                   "os_family": "Debian", "architecture": "x86_64"},
    "ubuntu2604": {"distribution": "Ubuntu", "distribution_version": "26.04", "distribution_major_version": "26",
                   "os_family": "Debian", "architecture": "x86_64"},
    "rocky9": {"distribution": "Rocky", "distribution_version": "9.4", "distribution_major_version": "9",
               "os_family": "RedHat", "architecture": "x86_64"},
    "arch": {"distribution": "Archlinux", "distribution_version": "2024.01", "distribution_major_version": "2024",
             "os_family": "Archlinux", "architecture": "x86_64"},
}
# NVIDIA's repository directory for each (the RHEL rebuilds share RHEL's)
REPO_DIR = {"ubuntu2404": "ubuntu2404", "ubuntu2604": "ubuntu2604", "rocky9": "rhel9"}
# what the new version's entry says (NVIDIA's repository directory as its others are named)
UBUNTU_2604 = {"name": "26.04", "galaxy": "resolute", "nvidia_repo": "ubuntu2604"}

# each role's check, run alone as a user runs the role (no preflight before it); what it decided, written to {{ out }}
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's platform check
      block:
        - ansible.builtin.include_role:
            name: blackwell.serving.{role}
            tasks_from: {tasks_from}
            public: true
          vars:
            ansible_facts: {facts}
            # nvidia_repo: the repository as the role would configure it, so that the role skips configuring it
            nvidia_repo_configured: "{{{{ expected_repo | default('') }}}}"
        - ansible.builtin.set_fact:
            __result: {{ok: true, msg: ""}}
      rescue:
        - ansible.builtin.set_fact:
            __result: {{ok: false, msg: "{{{{ ansible_failed_result.msg }}}}"}}
    - ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0644"
        content: "{{{{ __result | to_json }}}}"
"""
ENTRY = {"nvidia_driver": "set_vars", "cuda_toolkit": "preflight", "nvidia_repo": "main", "preflight": "platform"}


def expected_repo(platform):
    """nvidia_repo_configured as nvidia_repo sets it for this platform with the default URL and keys."""
    defaults = yaml.safe_load((REPO / "roles" / "nvidia_repo" / "defaults" / "main.yml").read_text())
    return (f"{defaults['nvidia_repo_base_url']}/{platform}/x86_64/ {defaults['nvidia_repo_key_fingerprint']} "
            f"{defaults['nvidia_repo_rpm_key_id']}")


def check(tmp_path, role, facts, collections=None, output=None, **extra):
    """What the role's check decided; where output is a list, the run's output is appended to it."""
    out = tmp_path / f"{role}.json"
    playbook = PLAYBOOK.format(role=role, tasks_from=ENTRY[role], facts=json.dumps(FACTS[facts]))
    if role == "nvidia_repo":
        extra.setdefault("expected_repo", expected_repo(REPO_DIR.get(facts, "")))
    proc = run_local_playbook(tmp_path, playbook, {"out": str(out), **extra}, collections=collections)
    if output is not None:
        output.append(proc.stdout)
    return json.loads(out.read_text())


@pytest.mark.parametrize("role", sorted(ENTRY))
def test_a_supported_version_is_accepted(tmp_path, role):
    assert check(tmp_path, role, "ubuntu2404") == {"ok": True, "msg": ""}


@pytest.mark.parametrize("role", ["nvidia_driver", "cuda_toolkit", "nvidia_repo"])
def test_an_unsupported_version_of_a_known_distribution_stops_naming_what_is_supported(tmp_path, role):
    got = check(tmp_path, role, "ubuntu2604")
    assert got == {"ok": False, "msg": f"localhost: {role} supports Ubuntu 22.04, 24.04; found Ubuntu 26.04. "
                                       "Nothing was changed."}


def test_an_unknown_distribution_stops_naming_every_supported_platform(tmp_path):
    got = check(tmp_path, "nvidia_driver", "arch")
    assert got["msg"] == ("localhost: nvidia_driver supports Ubuntu 22.04, 24.04, Debian 12, RedHat 9, Rocky 9, "
                          "AlmaLinux 9, OracleLinux 9; found Archlinux 2024.01. Nothing was changed.")


def test_a_rhel_rebuild_is_accepted_with_nvidias_rhel_repository(tmp_path):
    # the repository's directory (rhel9) comes from the table: the role finds it configured as expected and skips it
    assert check(tmp_path, "nvidia_repo", "rocky9") == {"ok": True, "msg": ""}
    assert check(tmp_path, "nvidia_driver", "rocky9") == {"ok": True, "msg": ""}


def test_preflight_reads_the_table_and_names_the_releases(tmp_path):
    got = check(tmp_path, "preflight", "ubuntu2604")
    assert not got["ok"]
    assert got["msg"].startswith("localhost: expected one of Ubuntu 22.04, 24.04, Debian 12, RedHat 9, Rocky 9, "
                                 "AlmaLinux 9, OracleLinux 9 on x86_64; found Ubuntu 26.04 on x86_64. "
                                 "Nothing was changed.")


def test_preflight_warns_and_carries_on_where_told_not_to_stop(tmp_path):
    said = []
    assert check(tmp_path, "preflight", "arch", output=said, preflight_fail_on_unsupported=False) == {"ok": True,
                                                                                                       "msg": ""}
    assert ("WARNING localhost: Archlinux 2024.01 on x86_64 is not supported; carrying on because "
            "preflight_fail_on_unsupported is false.") in said[0]
    # a supported platform says nothing
    assert check(tmp_path, "preflight", "ubuntu2404", output=said, preflight_fail_on_unsupported=False)["ok"]
    assert "WARNING" not in said[1]


def test_preflight_supported_platforms_still_overrides_the_table_in_preflight_only(tmp_path):
    override = {"preflight_supported_platforms": {"Ubuntu": ["26"]}}
    assert check(tmp_path, "preflight", "ubuntu2604", **override) == {"ok": True, "msg": ""}
    got = check(tmp_path, "preflight", "ubuntu2404", **override)
    assert "expected one of Ubuntu 26 on x86_64; found Ubuntu 24.04" in got["msg"]
    # the roles read the collection's table, never the preflight role's variable
    assert not check(tmp_path, "nvidia_driver", "ubuntu2604", **override)["ok"]


@pytest.fixture
def collection_with_ubuntu_2604(tmp_path):
    """A copy of the collection (its files linked) whose meta/platforms.yml names Ubuntu 26.04: the one edit of the
    walk in roles/preflight/README.md."""
    root = tmp_path / "collections"
    coll = root / "ansible_collections" / "blackwell" / "serving"
    coll.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name not in ("meta", "plugins", ".git", ".collections"):
            (coll / entry.name).symlink_to(entry)
    # copies: the plugins find the table beside them, by the real path of their files
    for name in ("meta", "plugins"):
        shutil.copytree(REPO / name, coll / name, ignore=shutil.ignore_patterns("__pycache__"))
    table = yaml.safe_load(TABLE.read_text())
    table["Ubuntu"]["versions"]["26"] = UBUNTU_2604
    (coll / "meta" / "platforms.yml").write_text(yaml.safe_dump(table, sort_keys=False))
    return root


@pytest.mark.parametrize("role", sorted(ENTRY))
def test_adding_the_version_to_the_table_is_what_makes_it_accepted(tmp_path, collection_with_ubuntu_2604, role):
    assert check(tmp_path, role, "ubuntu2604", collections=collection_with_ubuntu_2604) == {"ok": True, "msg": ""}


def test_adding_the_version_to_the_table_changes_the_galaxy_platforms():
    table = PLATFORMS.load()
    assert "resolute" not in role_platforms.block(table)
    table["Ubuntu"]["versions"]["26"] = UBUNTU_2604
    assert "      versions: [jammy, noble, resolute]\n" in role_platforms.block(table)


def test_the_roles_galaxy_platforms_are_generated_from_the_table():
    assert role_platforms.main(["--check"]) == 0, "run python3 tools/role_platforms.py"
    for path in role_platforms.metas():
        meta = yaml.safe_load(path.read_text())
        assert meta["galaxy_info"]["platforms"] == PLATFORMS.galaxy_platforms(), path


def test_a_stale_galaxy_platforms_block_is_found_and_rewritten(tmp_path):
    meta = tmp_path / "main.yml"
    original = (REPO / "roles" / "verify" / "meta" / "main.yml").read_text()
    meta.write_text(original.replace("[jammy, noble]", "[jammy]"))
    assert role_platforms.expected_meta(meta) == original
    # a meta/main.yml without the block gets it at the end of galaxy_info
    meta.write_text("---\ngalaxy_info:\n  author: x\ndependencies: []\n")
    assert role_platforms.expected_meta(meta) == "---\ngalaxy_info:\n  author: x\n" + role_platforms.block() \
        + "dependencies: []\n"


# the families whose NVIDIA packages the roles install; a distribution of another family needs the roles' work first
FAMILY = {"Ubuntu": "Debian", "Debian": "Debian", "RedHat": "RedHat", "Rocky": "RedHat", "AlmaLinux": "RedHat",
          "OracleLinux": "RedHat"}


@pytest.mark.parametrize("dist,major", [(d, m) for d, e in PLATFORMS.load().items() for m in e["versions"]])
def test_every_supported_platform_has_the_driver_packages_and_the_repository_key(dist, major):
    """nvidia_driver's packages (its release's vars file, else its distribution's or family's) and nvidia_repo's key
    (per family): a platform added to the table without them fails here, not on a host."""
    vars_dir = REPO / "roles" / "nvidia_driver" / "vars"
    assert dist in FAMILY, f"{dist}: a new family; teach the roles its packages, then add it to FAMILY here"
    candidates = [f"{dist}_{major}.yml", f"{dist}.yml", f"{FAMILY[dist]}.yml"]
    assert any((vars_dir / c).exists() for c in candidates), (dist, major, candidates)
    repo_vars = yaml.safe_load((REPO / "roles" / "nvidia_repo" / "vars" / "main.yml").read_text())
    assert FAMILY[dist] in repo_vars["__nvidia_repo_key_files"]


def test_the_table_is_checked_when_read(tmp_path):
    bad = tmp_path / "platforms.yml"
    bad.write_text("Ubuntu:\n  galaxy: Ubuntu\n  versions:\n    26: {name: '26.04', galaxy: resolute}\n")
    with pytest.raises(PLATFORMS.PlatformsError, match="not a major version in quotes"):
        PLATFORMS.load(str(bad))
    bad.write_text("Ubuntu:\n  galaxy: Ubuntu\n  versions:\n    '26': {name: '26.04', galaxy: resolute}\n")
    with pytest.raises(PLATFORMS.PlatformsError, match="expected exactly name, galaxy, nvidia_repo"):
        PLATFORMS.load(str(bad))


def test_the_preflight_default_is_the_table():
    defaults = yaml.safe_load((REPO / "roles" / "preflight" / "defaults" / "main.yml").read_text())
    assert defaults["preflight_supported_platforms"] == "{{ lookup('blackwell.serving.platforms') }}"
    assert PLATFORMS.majors() == {"Ubuntu": ["22", "24"], "Debian": ["12"], "RedHat": ["9"], "Rocky": ["9"],
                                  "AlmaLinux": ["9"], "OracleLinux": ["9"]}
