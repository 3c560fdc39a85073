"""`/metrics` counts the hosts' exchanges by result, every result from the start at 0 (so an
alert on the first refusals has a series to rise from)."""

from __future__ import annotations

import re

from control_plane.enrollment.services import ENROLLMENT_RESULTS
from control_plane.migrations.versions import rev0018_enrollment_tokens as migration
from tests.control_plane.enrollment.conftest import Enrollment

FAMILY = re.compile(r'^nachtwacht_enrollments_total\{result="([a-z_]+)"\} ([0-9]+)$', re.M)


def _enrollments(world: Enrollment) -> dict[str, int]:
    with world.api.client(world.operator_key) as operator:
        text = operator.get("/metrics").text
    return {result: int(n) for result, n in FAMILY.findall(text)}


def test_every_result_is_a_series_from_the_start(world: Enrollment) -> None:
    assert _enrollments(world) == dict.fromkeys(ENROLLMENT_RESULTS, 0)


def test_each_exchange_is_counted_by_its_result(world: Enrollment) -> None:
    issued = world.token(uses=2, name_pattern="web-*")
    world.enroll(issued.secret, "web-01")  # enrolled
    world.enroll(issued.secret, "web-01")  # agent_exists
    world.enroll(issued.secret, "db-01")  # agent_name_not_allowed
    world.enroll("nwe_" + "B" * 43)  # enrollment_token_refused (unknown)
    world.enroll(None)  # enrollment_token_refused (none)
    world.enroll(issued.secret, "web-02")  # enrolled: the token is now used up
    world.enroll(issued.secret, "web-03")  # enrollment_token_used_up
    world.later(days=2)
    world.enroll(world.token().secret, "web-04")  # made now: still good
    expired = world.token()
    world.later(days=2)
    world.enroll(expired.secret)  # enrollment_token_expired
    assert _enrollments(world) == {
        "enrolled": 3,
        "agent_exists": 1,
        "agent_name_not_allowed": 1,
        "enrollment_token_refused": 2,
        "enrollment_token_used_up": 1,
        "enrollment_token_expired": 1,
    }


def test_the_counts_check_lists_every_result() -> None:
    listed = re.search(r"result IN \((.*?)\)\)", migration.UPGRADE, re.S)
    assert listed is not None
    assert set(re.findall(r"'([a-z_]+)'", listed.group(1))) == set(ENROLLMENT_RESULTS)
