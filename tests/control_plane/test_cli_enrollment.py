"""`nachtwacht control enrollment-token create|list|revoke` as real processes against a real
database: the secret printed once with its install line, bounds refused naming the flag."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from control_plane.database import open_pool
from control_plane.enrollment.services import EnrollmentService
from control_plane.errors import Unauthenticated
from tests.control_plane.root_chain import RootChain
from tests.control_plane.test_cli import run_control

pytestmark = pytest.mark.slow


def _org(database_url: str) -> str:
    made = run_control("create-org", "Acme", "--json", "--database-url", database_url)
    assert made.returncode == 0, made.stderr
    org_id: str = json.loads(made.stdout)["org_id"]
    return org_id


def test_a_token_is_made_listed_used_and_revoked_from_the_command_line(
    database_url: str,
) -> None:
    database = ("--database-url", database_url)
    org_id = _org(database_url)
    made = run_control(
        "enrollment-token", "create", "--org", org_id, "--uses", "2", "--expires-in", "2h",
        "--name-pattern", "web-*", "--label", "web servers", "--url", "https://cp.example",
        *database,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    secret = next(word for word in made.stdout.split() if word.startswith("nwe_"))
    assert "shown once" in made.stdout
    # No trust root is published: the line trusts the release key, a file from the provider.
    assert (
        f"on the host, as root: nachtwacht agent install --url https://cp.example "
        f"--enrollment-token {secret} --trusted-key release.pub\n"
        "(release.pub comes from you, the provider, out of band, never from this control plane:"
        " the host's admin puts it on the host first, in the folder the line is run from)\n"
    ) in made.stdout

    listed = run_control("enrollment-token", "list", "--org", org_id, "--json", *database)
    assert listed.returncode == 0, listed.stderr
    (token,) = json.loads(listed.stdout)["tokens"]
    assert (token["state"], token["uses_left"], token["label"]) == ("active", 2, "web servers")
    assert token["created_by"].startswith("cli:")
    assert secret not in listed.stdout

    pool = open_pool(database_url, min_size=1, max_size=1)
    try:
        service = EnrollmentService(pool)
        enrolled = service.enroll(secret, "web-01", now=datetime.now(UTC))
        assert str(enrolled.org_id) == org_id
        revoked = run_control("enrollment-token", "revoke", token["id"], *database)
        assert revoked.returncode == 0, revoked.stderr
        assert "revoked" in revoked.stdout
        with pytest.raises(Unauthenticated):
            service.enroll(secret, "web-02", now=datetime.now(UTC))
    finally:
        pool.close()


def test_without_url_the_install_line_says_what_to_fill_in(database_url: str) -> None:
    org_id = _org(database_url)
    made = run_control(
        "enrollment-token", "create", "--org", org_id, "--json", "--database-url", database_url
    )
    assert made.returncode == 0, made.stderr
    shown = json.loads(made.stdout)
    assert shown["install_command"] == (
        f"nachtwacht agent install --url URL --enrollment-token {shown['secret']}"
        " --trusted-key release.pub"
    )
    assert (shown["token"]["uses_allowed"], shown["token"]["state"]) == (1, "active")


def test_the_install_line_trusts_the_newest_published_trust_root(
    database_url: str, tmp_path: Path
) -> None:
    database = ("--database-url", database_url)
    org_id = _org(database_url)
    chain = RootChain()
    (tmp_path / "root-1.json").write_bytes(chain.v1)
    (tmp_path / "root-2.json").write_bytes(chain.next(chain.v1))
    for version in (1, 2):
        published = run_control(
            "trust-root", "publish", str(tmp_path / f"root-{version}.json"), *database
        )
        assert published.returncode == 0, published.stderr
    made = run_control("enrollment-token", "create", "--org", org_id, *database)
    assert made.returncode == 0, made.stderr
    secret = next(word for word in made.stdout.split() if word.startswith("nwe_"))
    assert (
        f"on the host, as root: nachtwacht agent install --url URL --enrollment-token {secret}"
        " --trust-root root-2.json\n"
        "(root-2.json comes from you, the provider, out of band, never from this control plane:"
        " the host's admin puts it on the host first, in the folder the line is run from)\n"
    ) in made.stdout
    as_json = run_control("enrollment-token", "create", "--org", org_id, "--json", *database)
    shown = json.loads(as_json.stdout)
    assert shown["install_command"].endswith(" --trust-root root-2.json")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(("--uses", "0"), "--uses: 0 is outside 1 to 10000", id="no_use"),
        pytest.param(("--uses", "10001"), "--uses: 10001 is outside 1 to 10000", id="too_many"),
        pytest.param(
            ("--expires-in", "31d"),
            "--expires-in: '31d' is outside 1 minute to 30 days",
            id="over_30d",
        ),
        pytest.param(
            ("--expires-in", "0m"), "--expires-in: '0m' is outside 1 minute", id="under_1m"
        ),
        pytest.param(("--expires-in", "soon"), "--expires-in: 'soon' is not a duration", id="word"),
        pytest.param(("--label", "  "), "--label: '  ' is blank", id="blank_label"),
        # An install line the agent would refuse, refused here by the agent's own rule.
        pytest.param(
            ("--url", "ftp://cp.example"),
            "--url: 'ftp://cp.example' is not an address an agent can reach this control plane"
            " at (expected an http(s) URL such as https://control.example)",
            id="url_not_http",
        ),
        pytest.param(("--url", "https://cp example"), "(no space or control", id="url_space"),
        pytest.param(("--url", "https://cp.example:0"), "port from 1 to 65535", id="url_port"),
        pytest.param(("--url", "https://cp.example/?a=1"), "without ?query", id="url_query"),
        pytest.param(
            ("--url", "https://ops:hunter2@cp.example"),
            "--url: 'https://ops:***@cp.example' is not an address",
            id="url_password_not_shown",
        ),
    ],
)
def test_a_bound_is_refused_in_one_line_naming_the_flag(
    database_url: str, flags: tuple[str, ...], expected: str
) -> None:
    org_id = _org(database_url)
    refused = run_control(
        "enrollment-token", "create", "--org", org_id, *flags, "--database-url", database_url
    )
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert expected in refused.stderr, refused.stderr
    assert "hunter2" not in refused.stderr
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM enrollment_tokens").fetchone() == (0,)
