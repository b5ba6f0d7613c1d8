"""Static checks: ansible-lint (production profile), yamllint, changelog fragments."""
from helpers import REPO, run


def test_ansible_lint_production_profile():
    proc = run(["ansible-lint", "--profile", "production", "--nocolor"])
    assert proc.returncode == 0, "ansible-lint found violations (output above)"


def test_yamllint():
    proc = run(["yamllint", "--strict", "."])
    assert proc.returncode == 0, "yamllint found problems (output above)"


def test_changelog_fragments_lint():
    proc = run(["antsibull-changelog", "lint"])
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout
    assert list((REPO / "changelogs" / "fragments").glob("*.yml")), "no changelog fragment"
