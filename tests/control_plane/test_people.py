"""Named people, at the service: passwords and TOTP (RFC 6238's own test vectors), an
invitation's seven days and its single use under two requests at once, the lock's end."""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from control_plane.accounts.passwords import (
    hash_password,
    password_matches,
    totp_code,
    totp_step_of,
)
from control_plane.accounts.people import (
    INVITATION_LIFETIME,
    LOCK_AFTER,
    LOCKED_FOR,
    InvitationRefused,
    LastEditor,
    SignInRefused,
)
from control_plane.errors import InvalidInput
from control_plane.events.services import EventFilter
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.worlds.waiting import wait_until

NOW = datetime(2027, 3, 26, 11, 0, tzinfo=UTC)
EDITOR = Actor(kind="user", name="first panel key")
PASSWORD = "correct horse battery staple"
# RFC 6238, appendix B: the SHA-1 seed, and the eight-digit codes; six digits are their tail.
RFC_SEED = base64.b32encode(b"12345678901234567890").decode()


@pytest.mark.parametrize(
    ("unix_time", "eight_digits"),
    [
        pytest.param(59, "94287082", id="t59"),
        pytest.param(1111111109, "07081804", id="t1111111109"),
        pytest.param(1234567890, "89005924", id="t1234567890"),
        pytest.param(20000000000, "65353130", id="t20000000000"),
    ],
)
def test_totp_codes_are_rfc_6238s(unix_time: int, eight_digits: str) -> None:
    assert totp_code(RFC_SEED, unix_time // 30) == eight_digits[-6:]


def test_a_code_one_step_off_is_accepted_two_steps_off_is_not() -> None:
    at = datetime.fromtimestamp(1234567890, UTC)
    step = 1234567890 // 30
    assert totp_step_of(RFC_SEED, totp_code(RFC_SEED, step - 1), at) == step - 1
    assert totp_step_of(RFC_SEED, totp_code(RFC_SEED, step + 2), at) is None
    assert totp_step_of(RFC_SEED, "12345", at) is None
    full_width = "".join(chr(0xFF10 + int(digit)) for digit in "123456")
    assert totp_step_of(RFC_SEED, full_width, at) is None  # isdigit() alone would let them by


def test_a_password_hash_matches_its_password_only() -> None:
    stored = hash_password(PASSWORD)
    assert stored.startswith("scrypt$16384$8$1$")
    assert password_matches(stored, PASSWORD)
    assert not password_matches(stored, PASSWORD + " ")
    assert not password_matches(None, PASSWORD)


def _invited(services: Services, org_id: object, email: str = "anna@example.com") -> str:
    issued = services.people.invite(
        org_id,  # type: ignore[arg-type]
        name="Anna de Vries",
        email=email,
        role="editor",
        now=NOW,
        actor=EDITOR,
    )
    return issued.token


@pytest.fixture
def org_id(services: Services) -> object:
    return services.accounts.create_org("Acme", now=NOW).org_id


def test_an_invitation_expires_after_seven_days(services: Services, org_id: object) -> None:
    token = _invited(services, org_id)
    services.people.invitation(token, now=NOW + INVITATION_LIFETIME - timedelta(seconds=1))
    with pytest.raises(InvitationRefused) as refused:
        services.people.accept(token, PASSWORD, now=NOW + INVITATION_LIFETIME)
    assert refused.value.reason == "expired"


def test_an_invitation_used_twice_at_once_is_used_once(services: Services, org_id: object) -> None:
    token = _invited(services, org_id)
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def use() -> None:
        start.wait()
        try:
            services.people.accept(token, PASSWORD, now=NOW)
            outcomes.append("accepted")
        except InvitationRefused as exc:
            outcomes.append(exc.reason)

    threads = [threading.Thread(target=use) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["accepted", "used"]


def test_the_same_address_cannot_be_invited_twice(services: Services, org_id: object) -> None:
    _invited(services, org_id)
    with pytest.raises(Exception, match="already a person"):
        _invited(services, org_id, email="ANNA@example.com")


def test_an_invitation_names_its_field_when_refused(services: Services, org_id: object) -> None:
    with pytest.raises(InvalidInput, match="email"):
        _invited(services, org_id, email="not an address")


@pytest.mark.parametrize(
    "email",
    [
        pytest.param("anna\x1b[8m@example.com", id="terminal_escape"),
        pytest.param("anna\x7f@example.com", id="delete"),
        pytest.param("anna@example.com\x9b", id="c1_control"),
        pytest.param("anna\x00@example.com", id="nul"),
        pytest.param("\u202emoc.elpmaxe@anna", id="right_to_left_override"),
    ],
)
def test_an_address_with_a_control_character_is_refused_and_nothing_is_stored(
    services: Services, org_id: object, pool: Pool, email: str
) -> None:
    """An address is shown on the panel and is what a person types to sign in: one with a control
    character would look like another person's (`anna@example.com`) and be a second account."""
    _invited(services, org_id)
    with pytest.raises(InvalidInput) as refused:
        _invited(services, org_id, email=email)
    assert str(refused.value).startswith("email: "), refused.value
    assert (
        "control character" in str(refused.value)
        or "NUL" in str(refused.value)
        or ("bidirectional control U+202E" in str(refused.value))
    )
    with pool.connection() as conn:
        stored = conn.execute("SELECT email FROM people ORDER BY email").fetchall()
    assert [row["email"] for row in stored] == ["anna@example.com"]


def test_an_address_with_a_bidirectional_control_names_it_as_one(
    services: Services, org_id: object
) -> None:
    with pytest.raises(InvalidInput) as refused:
        _invited(services, org_id, email="anna\u2067@example.com")
    assert "contains the bidirectional control U+2067" in str(refused.value), refused.value
    assert "expected an e-mail address" in str(refused.value)
    assert services.people.people(org_id) == ()  # type: ignore[arg-type]


def test_a_name_with_a_bidirectional_control_is_refused(services: Services, org_id: object) -> None:
    """'Mallory\u202e' on the trail would show the rest of its line backwards."""
    with pytest.raises(InvalidInput) as refused:
        services.people.invite(
            org_id,  # type: ignore[arg-type]
            name="Mallory\u202e",
            email="mallory@example.com",
            role="viewer",
            now=NOW,
            actor=EDITOR,
        )
    assert str(refused.value).startswith("name: "), refused.value
    assert "bidirectional control U+202E" in str(refused.value)
    assert services.people.people(org_id) == ()  # type: ignore[arg-type]


def test_the_lock_ends_after_its_time(services: Services, org_id: object) -> None:
    token = _invited(services, org_id)
    services.people.accept(token, PASSWORD, now=NOW)
    for _ in range(LOCK_AFTER):
        with pytest.raises(SignInRefused):
            services.people.sign_in("anna@example.com", "wrong password!", now=NOW)
    with pytest.raises(SignInRefused) as locked:
        services.people.sign_in("anna@example.com", PASSWORD, now=NOW + LOCKED_FOR / 2)
    assert locked.value.reason == "locked"
    pending = services.people.sign_in("anna@example.com", PASSWORD, now=NOW + LOCKED_FOR)
    assert pending.totp_secret is not None


def test_the_invitation_on_the_trail_holds_no_link(services: Services, org_id: object) -> None:
    token = _invited(services, org_id)
    events = services.events.trail(EventFilter(kind="person.invited", limit=5)).events
    assert [e.data["name"] for e in events] == ["Anna de Vries"]
    assert token not in str(events[0].data)


@pytest.mark.parametrize(
    "issuer", ["https://idp.example/", "https://idp.example", "http://127.0.0.1:8080/realm/"]
)
def test_an_issuer_is_kept_as_the_provider_writes_it(issuer: str) -> None:
    # Compared as a string with the discovery document's and the ID token's: a trailing slash
    # taken off would refuse every sign-in through a provider whose issuer has one.
    from control_plane.accounts.oidc import checked_issuer
    from control_plane.notifications.addresses import WebhookAddressPolicy

    loopback_allowed = WebhookAddressPolicy.allowing(["127.0.0.0/8"])
    assert checked_issuer(f"  {issuer} ", loopback_allowed) == issuer


@pytest.mark.parametrize(
    "issuer", ["http://idp.example", "ftp://idp.example", "https://", "", "   ", 7]
)
def test_an_issuer_that_is_not_https_is_refused_by_name(issuer: object) -> None:
    from control_plane.accounts.oidc import checked_issuer
    from control_plane.notifications.addresses import WebhookAddressPolicy

    with pytest.raises(InvalidInput, match="issuer"):
        checked_issuer(issuer, WebhookAddressPolicy())


@pytest.mark.parametrize(
    "issuer",
    [
        "http://127.0.0.1:8080/realm",
        "http://[::1]:8080/",
        "http://localhost/",
        "https://10.1.2.3/",
        "https://169.254.169.254/latest",
        "https://[fd00::5]/",
        "https://2130706433/",
    ],
)
def test_an_issuer_at_an_address_not_allowed_is_refused_naming_it(issuer: str) -> None:
    from control_plane.accounts.oidc import ADDRESS_REFUSED, checked_issuer
    from control_plane.notifications.addresses import WebhookAddressPolicy

    with pytest.raises(InvalidInput) as refused:
        checked_issuer(issuer, WebhookAddressPolicy())
    assert refused.value.code == ADDRESS_REFUSED
    assert refused.value.fields == {"field": "issuer", "value": issuer}
    assert "public addresses" in refused.value.message
    assert "--outbound-allow-network" in refused.value.message


def test_two_editors_demoting_each_other_at_once_leave_one_editor(
    services: Services, org_id: object, pool: Pool
) -> None:
    """Both demotions are made to read the editors before either writes (the test holds both
    people's rows until both wait); the editors' lock makes them decide one after the other."""
    for email in ("anna@example.com", "bob@example.com"):
        _invited(services, org_id, email)
    ids = [person.id for person in services.people.people(org_id)]  # type: ignore[arg-type]
    outcomes: list[str] = []

    def demote(person_id: UUID) -> None:
        try:
            services.people.change_role(
                org_id,  # type: ignore[arg-type]
                person_id,
                "viewer",
                now=NOW,
                actor=EDITOR,
            )
            outcomes.append("demoted")
        except LastEditor:
            outcomes.append("last_editor")

    threads = [threading.Thread(target=demote, args=(person_id,)) for person_id in ids]
    with pool.connection() as holder, holder.transaction():
        holder.execute("SELECT id FROM people WHERE id = ANY(%s) FOR UPDATE", [ids])
        for thread in threads:
            thread.start()
        wait_until(lambda: _waiting_on_locks(pool) >= 2, what="both demotions waiting")
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["demoted", "last_editor"]
    roles = [person.role for person in services.people.people(org_id)]  # type: ignore[arg-type]
    assert sorted(roles) == ["editor", "viewer"]


def _waiting_on_locks(pool: Pool) -> int:
    # A connection of its own: the activity view is a snapshot taken once per transaction.
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.parametrize(
    ("client_id", "named"),
    [
        pytest.param("nachtwacht\u202e", "bidirectional control U+202E", id="override"),
        pytest.param("\u2066nachtwacht", "bidirectional control U+2066", id="isolate"),
        pytest.param("nacht\x1b[8mwacht", "control character U+001B", id="escape"),
    ],
)
def test_a_client_id_with_a_control_is_refused_and_nothing_is_stored(
    services: Services, org_id: object, pool: Pool, client_id: str, named: str
) -> None:
    """A client id is typed by an editor and shown on the people page and the trail: plain text,
    held to the rule every name keeps."""
    with pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM events").fetchone()
    with pytest.raises(InvalidInput) as refused:
        services.oidc.put(
            org_id,  # type: ignore[arg-type]
            issuer="https://idp.example",
            client_id=client_id,
            client_secret="s3cret",
            now=NOW,
            actor=EDITOR,
        )
    assert str(refused.value).startswith("client_id: "), refused.value
    assert named in str(refused.value)
    assert services.oidc.get(org_id) is None  # type: ignore[arg-type]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM events").fetchone() == before
