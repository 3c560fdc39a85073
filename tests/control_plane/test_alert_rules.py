"""The Prometheus alert rules shipped in packaging/prometheus: valid (`promtool check rules`), each
alert firing on its recorded series and quiet on a good night (`promtool test rules`), and every
metric and label they name one that a real `/metrics` exports.

promtool comes with Debian's `prometheus` package (`bin/test` installs it when it runs as root).
Without it these tests are skipped on a developer's machine and fail in CI (`CI` set), where a
skip would let a broken rule ship.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from tests.conftest import REPO_ROOT
from tests.control_plane.conftest import Api, sign_release
from tests.worlds.clocks import ManualClock

RULES_DIR = REPO_ROOT / "packaging" / "prometheus"
RULES = RULES_DIR / "nachtwacht.rules.yml"
RULE_TESTS = RULES_DIR / "nachtwacht.rules.test.yml"

# A metric name followed by its matchers, e.g. `nachtwacht_runs{status="missed"}`.
SELECTOR = re.compile(r"\b(nachtwacht_[a-z_]+)\b(?:\{([^}]*)\})?")
MATCHER_LABEL = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)")
SAMPLE = re.compile(r"^(nachtwacht_[a-z_]+)(?:\{(.*)\})? \S+$")


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: install Debian's `prometheus` package")
        pytest.skip("needs promtool (Debian's `prometheus` package; bin/test installs it as root)")
    return found


def _run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args],
        cwd=RULES_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_rules_are_valid() -> None:
    checked = _run_promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 19 rules found" in checked.stdout


# promtool evaluates every rule each minute of each test's span (a day for the missed slots).
@pytest.mark.slow
def test_each_alert_fires_on_its_night_and_stays_quiet_on_a_good_one() -> None:
    tested = _run_promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_test_that_fires_it_and_one_that_stays_quiet() -> None:
    alerts = {rule["alert"] for group in _rules()["groups"] for rule in group["rules"]}
    fired, quiet = set(), set()
    for case in yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert fired == alerts
    assert quiet == alerts


def _rules() -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return loaded


def _selectors() -> dict[str, set[str]]:
    """Each metric the rules' expressions name, with the labels their matchers name."""
    named: dict[str, set[str]] = {}
    groups = _rules()["groups"]
    assert isinstance(groups, list)
    for group in groups:
        for rule in group["rules"]:
            for name, matchers in SELECTOR.findall(rule["expr"]):
                named.setdefault(name, set()).update(MATCHER_LABEL.findall(matchers))
    return named


def _scraped(text: str) -> dict[str, set[str]]:
    """Each metric a scrape has samples of, with the labels its samples carry."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        sample = SAMPLE.match(line)
        if sample:
            labels = re.findall(r'([a-z_]+)="', sample.group(2) or "")
            found.setdefault(sample.group(1), set()).update(labels)
    return found


def test_the_rules_name_only_metrics_and_labels_that_metrics_exports(
    api: Api,
    services: Services,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
) -> None:
    # One release on record, so every family the rules read has its samples.
    release = sign_release(release_key, version="1.5.0", manifest_version=42)
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    with api.client(operator_key) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    exported = _scraped(answer.text)
    named = _selectors()
    assert named, "the rules name no metric: the pattern no longer matches them"
    missing = sorted(set(named) - set(exported))
    assert not missing, f"the rules name metrics /metrics does not export: {missing}"
    for name, labels in sorted(named.items()):
        assert labels <= exported[name], f"{name}: labels {sorted(labels - exported[name])} unknown"


def test_a_renamed_metric_is_caught() -> None:
    # The check above reads the rules with this pattern: a name it cannot see it cannot check.
    expr = 'sum(increase(nachtwacht_release_outcome_total{outcome=~"failed"}[1h]))'
    assert SELECTOR.findall(expr) == [("nachtwacht_release_outcome_total", 'outcome=~"failed"')]
    assert "nachtwacht_release_outcome_total" not in _scraped(
        'nachtwacht_release_outcomes_total{outcome="failed"} 1\n'
    )


def test_the_rule_files_sit_together() -> None:
    # `promtool test rules` finds the rules beside its test file.
    assert Path(RULE_TESTS.parent, "nachtwacht.rules.yml") == RULES
    assert RULES.name in yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["rule_files"]
