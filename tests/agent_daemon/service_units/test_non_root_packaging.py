"""Non-root mode: the drop-in that runs the updater as its own user, and the polkit rule that lets
that user restart exactly the managed unit and nothing else (evaluated by a real JavaScript
engine when the host has one, as polkitd would)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.agent_daemon.service_units.test_systemd_units import directives

PACKAGING = Path(__file__).resolve().parents[3] / "packaging"
UNIT = PACKAGING / "systemd/nachtwacht-agent.service"
DROP_IN = PACKAGING / "systemd/nachtwacht-agent.service.d/non-root.conf"
RULE = PACKAGING / "polkit/50-nachtwacht-agent.rules"
USER = "nachtwacht-agent"

# polkit's JavaScript environment, reduced to what a rule touches; prints the rule's answer.
_POLKIT_HARNESS = """
const fs = require("fs");
const cases = JSON.parse(process.argv[3]);
const rules = [];
const polkit = {
  Result: {YES: "yes", NO: "no", AUTH_ADMIN: "auth_admin", NOT_HANDLED: null},
  addRule: (rule) => rules.push(rule),
};
new Function("polkit", fs.readFileSync(process.argv[2], "utf8"))(polkit);
const answers = cases.map(([id, user, unit, verb]) => {
  const action = {id, lookup: (key) => ({unit, verb})[key]};
  for (const rule of rules) {
    const result = rule(action, {user});
    if (result !== null && result !== undefined) return result;
  }
  return "not_handled";
});
console.log(JSON.stringify(answers));
"""

MANAGE = "org.freedesktop.systemd1.manage-units"
UNIT_FILES = "org.freedesktop.systemd1.manage-unit-files"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs a JavaScript engine (node)")
@pytest.mark.parametrize(
    ("case", "answer"),
    [
        pytest.param((MANAGE, USER, "provibr-agent.service", "restart"), "yes", id="the_one_yes"),
        pytest.param((MANAGE, USER, "provibr-agent.service", "stop"), "not_handled", id="stop"),
        pytest.param((MANAGE, USER, "provibr-agent.service", "start"), "not_handled", id="start"),
        pytest.param((MANAGE, USER, "sshd.service", "restart"), "not_handled", id="other_unit"),
        pytest.param(
            (MANAGE, USER, "provibr-agent.service.d", "restart"), "not_handled", id="unit_prefix"
        ),
        pytest.param(
            (MANAGE, "www-data", "provibr-agent.service", "restart"),
            "not_handled",
            id="other_user",
        ),
        pytest.param(
            (f"{MANAGE[: -len('units')]}unit-files", USER, "provibr-agent.service", "restart"),
            "not_handled",
            id="unit_files",
        ),
        pytest.param(
            ("org.freedesktop.login1.reboot", USER, None, None), "not_handled", id="reboot"
        ),
    ],
)
def test_the_polkit_rule_allows_restarting_the_managed_unit_and_nothing_else(
    tmp_path: Path, case: tuple[str, str, str | None, str | None], answer: str
) -> None:
    harness = tmp_path / "harness.js"
    harness.write_text(_POLKIT_HARNESS)
    result = subprocess.run(
        ["node", str(harness), str(RULE), json.dumps([case])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [answer]


def test_the_drop_in_runs_the_updater_as_its_own_user_without_capabilities() -> None:
    drop_in = directives(DROP_IN)
    assert drop_in["User"] == [USER]
    assert drop_in["CapabilityBoundingSet"] == [""]
    assert drop_in["AmbientCapabilities"] == [""]
    # The root unit it modifies restarts the unit the rule names, through systemctl (polkit).
    unit = directives(UNIT)
    assert unit["ReadWritePaths"] == ["/opt/provibr-agent -/opt/nachtwacht"]


def test_the_user_and_the_install_root_agree_across_the_files() -> None:
    sysusers = (PACKAGING / "sysusers.d/nachtwacht-agent.conf").read_text().split("\n")
    assert f'u {USER} - "nachtwacht agent updater" /var/lib/nachtwacht-agent' in sysusers
    tmpfiles = (PACKAGING / "tmpfiles.d/nachtwacht-agent.conf").read_text().split("\n")
    assert f"d /opt/provibr-agent 0755 {USER} {USER} -" in tmpfiles
    assert '"provibr-agent.service"' in RULE.read_text()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_accepts_the_unit_with_the_drop_in(tmp_path: Path) -> None:
    # systemd-analyze loads `<unit>.d/*.conf` from beside the unit file it verifies.
    lines = [
        "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
        for line in UNIT.read_text().splitlines()
    ]
    (tmp_path / UNIT.name).write_text("\n".join(lines) + "\n")
    (tmp_path / f"{UNIT.name}.d").mkdir()
    shutil.copy(DROP_IN, tmp_path / f"{UNIT.name}.d" / DROP_IN.name)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / UNIT.name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""
