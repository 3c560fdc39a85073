"""The networks the control plane may reach for an organisation (its webhook, its OpenID Connect
provider): one setting under its new name, its older webhook name still read."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from control_plane.cli import _parser
from control_plane.config import load_trusted_keys, webhook_policy
from control_plane.errors import ConfigurationError

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


@pytest.mark.parametrize("flag", ["--outbound-allow-network", "--webhook-allow-network"])
def test_both_flag_names_allow_the_network(flag: str) -> None:
    args = _parser().parse_args(["serve", flag, "127.0.0.0/8"])
    assert webhook_policy(args.outbound_allow_network, {}).allowed_networks == LOOPBACK


@pytest.mark.parametrize(
    "name", ["NACHTWACHT_OUTBOUND_ALLOW_NETWORKS", "NACHTWACHT_WEBHOOK_ALLOW_NETWORKS"]
)
def test_both_environment_names_allow_the_network(name: str) -> None:
    assert webhook_policy(None, {name: "127.0.0.0/8"}).allowed_networks == LOOPBACK


def test_the_new_environment_name_wins_over_the_old() -> None:
    env = {
        "NACHTWACHT_OUTBOUND_ALLOW_NETWORKS": "127.0.0.0/8",
        "NACHTWACHT_WEBHOOK_ALLOW_NETWORKS": "10.0.0.0/8",
    }
    assert webhook_policy(None, env).allowed_networks == LOOPBACK


def test_a_bad_network_names_the_setting_and_the_value() -> None:
    with pytest.raises(ConfigurationError, match=r"--outbound-allow-network: 'ten' is not a"):
        webhook_policy(["ten"], {})


@pytest.mark.parametrize(
    "name", ["NACHTWACHT_OUTBOUND_ALLOW_NETWORKS", "NACHTWACHT_WEBHOOK_ALLOW_NETWORKS"]
)
def test_a_bad_network_in_the_environment_names_the_variable_it_came_from(name: str) -> None:
    # Under systemd the operator sets only the variable: a flag they never typed would mislead.
    with pytest.raises(ConfigurationError, match=rf"^{name}: '10.20.0.0/33' is not a network"):
        webhook_policy(None, {name: "10.20.0.0/33"})


def test_a_release_key_that_cannot_be_read_names_the_flag_and_the_variable(tmp_path: Path) -> None:
    missing = tmp_path / "release.pub"
    with pytest.raises(ConfigurationError) as refused:
        load_trusted_keys((missing,))
    assert str(refused.value) == (
        f"--release-public-key (NACHTWACHT_RELEASE_PUBLIC_KEYS): {missing}: cannot be read "
        "(No such file or directory)"
    )
