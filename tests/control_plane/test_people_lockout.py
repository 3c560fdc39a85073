"""The sign-in lock at the service: kept per address typed, a person's or nobody's, alike in its
count, its time, its cost and under tries made at once; no typed address is kept; forgotten rows
are removed by retention, counted."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime, timedelta

import pytest

from control_plane.accounts import passwords
from control_plane.accounts.people import (
    ADDRESS_KEY_SQL,
    FAILURES_FORGOTTEN_AFTER,
    LOCK_AFTER,
    LOCKED_FOR,
    SignInRefused,
    address_key,
)
from control_plane.errors import Conflict
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.retention import RetentionBatches, RetentionWalk, read_standing
from control_plane.types import Pool

NOW = datetime(2027, 3, 26, 11, 0, tzinfo=UTC)
EDITOR = Actor(kind="user", name="first panel key")
PASSWORD = "correct horse battery staple"
WRONG = "not the password at all"
KNOWN = "anna@example.com"
UNKNOWN = "nobody@example.com"


@pytest.fixture
def org_id(services: Services) -> object:
    return services.accounts.create_org("Acme", now=NOW).org_id


@pytest.fixture
def anna(services: Services, org_id: object) -> object:
    """Anna, invited with KNOWN, her password set: she signs in."""
    issued = services.people.invite(
        org_id,  # type: ignore[arg-type]
        name="Anna de Vries",
        email=KNOWN,
        role="editor",
        now=NOW,
        actor=EDITOR,
    )
    services.people.accept(issued.token, PASSWORD, now=NOW)
    return issued.person.id


def _answer(services: Services, email: str, password: str, at: datetime) -> str:
    try:
        services.people.sign_in(email, password, now=at)
    except SignInRefused as refused:
        return refused.reason
    return "pending"


def _tries(services: Services, email: str, count: int, at: datetime = NOW) -> list[str]:
    return [_answer(services, email, WRONG, at) for _ in range(count)]


@pytest.mark.usefixtures("anna")
@pytest.mark.parametrize("email", [KNOWN, UNKNOWN])
def test_the_lock_holds_for_its_time_for_any_address(services: Services, email: str) -> None:
    assert _tries(services, email, LOCK_AFTER + 1) == ["wrong"] * LOCK_AFTER + ["locked"]
    assert _answer(services, email, PASSWORD, NOW + LOCKED_FOR / 2) == "locked"
    # Its time over, the address is weighed again (and its count started anew at the lock).
    after = _answer(services, email, PASSWORD, NOW + LOCKED_FOR)
    assert after == ("pending" if email == KNOWN else "wrong")


@pytest.mark.usefixtures("anna")
@pytest.mark.parametrize("email", [KNOWN, UNKNOWN])
def test_every_spelling_of_an_address_shares_its_lock(services: Services, email: str) -> None:
    """A person's address is compared without case: typing it in capitals is no fresh count."""
    _tries(services, email.upper(), LOCK_AFTER)
    assert _answer(services, f"  {email.title()} ", PASSWORD, NOW) == "locked"


@pytest.mark.usefixtures("anna")
def test_a_known_and_an_unknown_address_cost_the_same(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What takes the time is the password's hash: computed for each wrong try of either, for
    no locked try of either."""
    computed: list[str] = []
    scrypt = hashlib.scrypt

    def counted(password: bytes, **kwargs: object) -> bytes:
        computed.append("scrypt")
        return scrypt(password, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(passwords.hashlib, "scrypt", counted)

    def hashes(email: str) -> list[int]:
        made = []
        for _ in range(LOCK_AFTER + 2):
            computed.clear()
            _answer(services, email, WRONG, NOW)
            made.append(len(computed))
        return made

    assert hashes(KNOWN) == hashes(UNKNOWN) == [1] * LOCK_AFTER + [0, 0]


@pytest.mark.usefixtures("anna")
@pytest.mark.parametrize("email", [KNOWN, UNKNOWN])
def test_tries_made_at_once_are_weighed_one_after_the_other(services: Services, email: str) -> None:
    """Ten wrong passwords sent together: five are weighed, five are locked out, for a person's
    address as for nobody's (unordered, an unknown address would have had all ten weighed)."""
    count = 2 * LOCK_AFTER
    start = threading.Barrier(count)
    answers: list[str] = []

    def one() -> None:
        start.wait()
        answers.append(_answer(services, email, WRONG, NOW))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == ["locked"] * LOCK_AFTER + ["wrong"] * LOCK_AFTER


@pytest.mark.usefixtures("anna")
def test_no_typed_address_is_kept(services: Services, pool: Pool) -> None:
    _tries(services, KNOWN, 2)
    _tries(services, "Mallory@Example.com", 2)
    with pool.connection() as conn:
        rows = conn.execute("SELECT * FROM sign_in_failures ORDER BY address_sha256").fetchall()
    kept = str(rows).lower()
    assert "anna" not in kept and "mallory" not in kept
    assert sorted(row["address_sha256"] for row in rows) == sorted(
        hashlib.sha256(address.encode()).hexdigest() for address in (KNOWN, "mallory@example.com")
    )


@pytest.mark.usefixtures("anna")
@pytest.mark.parametrize("email", [KNOWN, UNKNOWN])
def test_failures_a_day_old_are_forgotten(services: Services, email: str) -> None:
    _tries(services, email, LOCK_AFTER - 1)
    later = NOW + FAILURES_FORGOTTEN_AFTER
    assert _tries(services, email, LOCK_AFTER, later) == ["wrong"] * LOCK_AFTER
    assert _answer(services, email, PASSWORD, later) == "locked"


def test_wrong_codes_lock_the_address_too(services: Services, anna: object) -> None:
    pending = services.people.sign_in(KNOWN, PASSWORD, now=NOW)
    for _ in range(LOCK_AFTER):
        with pytest.raises(SignInRefused):
            services.people.verify_code(pending.secret, "000000", now=NOW)
    assert _answer(services, KNOWN, PASSWORD, NOW) == "locked"
    assert _answer(services, KNOWN.upper(), PASSWORD, NOW) == "locked"


def test_a_password_reset_lifts_the_lock(services: Services, org_id: object, anna: object) -> None:
    _tries(services, KNOWN, LOCK_AFTER)
    issued = services.people.reissue(
        org_id,  # type: ignore[arg-type]
        anna,  # type: ignore[arg-type]
        reset=True,
        now=NOW,
        actor=EDITOR,
    )
    assert issued is not None
    services.people.accept(issued.token, PASSWORD + "!", now=NOW)
    assert _answer(services, KNOWN, PASSWORD + "!", NOW) == "pending"


def test_a_signed_in_person_counts_from_nought(services: Services, anna: object) -> None:
    _tries(services, KNOWN, LOCK_AFTER - 1)
    pending = services.people.sign_in(KNOWN, PASSWORD, now=NOW)
    assert pending.totp_secret is not None
    step = int(NOW.timestamp()) // passwords.TOTP_STEP_SECONDS
    services.people.verify_code(
        pending.secret, passwords.totp_code(pending.totp_secret, step), now=NOW
    )
    assert _tries(services, KNOWN, LOCK_AFTER) == ["wrong"] * LOCK_AFTER


def _rows(pool: Pool) -> list[str]:
    with pool.connection() as conn:
        rows = conn.execute("SELECT address_sha256 FROM sign_in_failures").fetchall()
    return sorted(row["address_sha256"] for row in rows)


@pytest.mark.usefixtures("anna")
def test_retention_removes_forgotten_failures_in_batches_and_counts_them(
    services: Services, pool: Pool
) -> None:
    """Addresses not tried for a day go at the next walk, whatever `retention_days` says; the
    young ones and their locks stay."""
    for n in range(5):
        _tries(services, f"old{n}@example.com", 1)
    walk_at = NOW + FAILURES_FORGOTTEN_AFTER + timedelta(minutes=1)
    young_at = walk_at - timedelta(minutes=1)
    _tries(services, KNOWN, LOCK_AFTER, young_at)
    _tries(services, UNKNOWN, LOCK_AFTER, young_at)
    young = sorted(hashlib.sha256(address.encode()).hexdigest() for address in (KNOWN, UNKNOWN))
    batches = RetentionBatches(rows=2, transactions_per_tick=10_000, pause_seconds=0)
    tick = RetentionWalk(pool, batches=batches).tick(walk_at)
    assert tick.completed
    assert tick.sign_in_failures == 5
    assert _rows(pool) == young
    with pool.connection() as conn:
        assert read_standing(conn).removed["sign_in_failures"] == 5
    assert _answer(services, UNKNOWN, PASSWORD, walk_at) == "locked"


# Spellings of an address that differ in the case of one letter outside A-Z, or in a letter some
# lower-casing rule folds onto another: the Turkish dotted and dotless i, the German sharp s and
# its capital, the Kelvin sign, a letter with an umlaut.
SPELLINGS = [
    "admin@example.com",
    "ADMIN@EXAMPLE.COM",
    "adm\u0130n@example.com",  # İ: lower() in Python gives i + U+0307; PostgreSQL's may give i
    "ADM\u0130N@example.com",
    "adm\u0131n@example.com",  # the dotless i
    "\u00e4dmin@example.com",  # a with umlaut
    "\u00c4DMIN@example.com",  # its capital
    "stra\u00dfe@example.com",  # ß
    "STRA\u1e9eE@example.com",  # ẞ
    "STRASSE@example.com",
    "\u212aarin@example.com",  # the Kelvin sign
    "karin@example.com",
]


def _invited(services: Services, org_id: object, email: str) -> None:
    issued = services.people.invite(
        org_id,  # type: ignore[arg-type]
        name="Someone",
        email=email,
        role="editor",
        now=NOW,
        actor=EDITOR,
    )
    services.people.accept(issued.token, PASSWORD, now=NOW)


@pytest.mark.parametrize(
    "invited",
    ["admin@example.com", "\u00e4dmin@example.com", "karin@example.com", "stra\u00dfe@example.com"],
)
def test_a_spelling_reaches_a_person_exactly_when_it_shares_their_lock(
    services: Services, org_id: object, invited: str
) -> None:
    """One rule matches an address typed at sign-in to a person and to the lock: a spelling that
    signs the person in is locked with their address, one that is locked with it signs them in —
    changing the case of one letter never buys a fresh count against a person's password."""
    _invited(services, org_id, invited)
    later = NOW + FAILURES_FORGOTTEN_AFTER * 2
    reaches = {email: _answer(services, email, PASSWORD, later) == "pending" for email in SPELLINGS}
    assert reaches[invited]
    locked_at = later + FAILURES_FORGOTTEN_AFTER * 2
    assert _tries(services, invited, LOCK_AFTER, locked_at) == ["wrong"] * LOCK_AFTER
    shares = {
        email: _answer(services, email, PASSWORD, locked_at) == "locked" for email in SPELLINGS
    }
    assert reaches == shares


@pytest.mark.parametrize("first", ["admin@example.com", "\u00e4dmin@example.com"])
def test_no_two_people_share_an_address_or_a_lock(
    services: Services, org_id: object, first: str
) -> None:
    """Each spelling invited after `first` is refused at the address, or is a person of its own
    whose lock is not `first`'s."""
    _invited(services, org_id, first)
    at = NOW + FAILURES_FORGOTTEN_AFTER * 2
    for email in SPELLINGS:
        try:
            _invited(services, org_id, email)
        except Conflict as refused:
            assert refused.fields["field"] == "email"
            continue
        at += FAILURES_FORGOTTEN_AFTER * 2
        assert _tries(services, email, LOCK_AFTER, at) == ["wrong"] * LOCK_AFTER
        assert _answer(services, email, PASSWORD, at) == "locked"
        assert _answer(services, first, PASSWORD, at) == "pending", email


def test_the_database_folds_an_address_as_address_key_does(pool: Pool) -> None:
    """`ADDRESS_KEY_SQL` and `address_key` are one rule in two languages, for every character
    PostgreSQL's text can hold in the Basic Multilingual Plane and the letters beyond it."""
    characters = [
        chr(code) for code in (*range(1, 0xD800), *range(0xE000, 0x10000), *range(0x10400, 0x10450))
    ]
    with pool.connection() as conn:
        for start in range(0, len(characters), 4096):
            text = "x" + "".join(characters[start : start + 4096]) + "x"
            row = conn.execute(
                f"SELECT {ADDRESS_KEY_SQL} AS key FROM (SELECT %s::text AS email) p",  # noqa: S608
                [text],
            ).fetchone()
            assert row is not None
            assert row["key"] == address_key(text), start
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'people_live_address'"
        ).fetchone()
    assert index is not None
    assert '(lower((email COLLATE "C")))' in index["indexdef"], index
    assert "WHERE (removed_at IS NULL)" in index["indexdef"], index


def test_a_providers_verified_address_is_matched_by_the_same_rule(
    services: Services, org_id: object
) -> None:
    _invited(services, org_id, "admin@example.com")
    assert (
        services.people.person_by_claims(
            org_id,  # type: ignore[arg-type]
            subject="s-1",
            email="adm\u0130n@example.com",
        )
        is None
    )
    found = services.people.person_by_claims(
        org_id,  # type: ignore[arg-type]
        subject="s-2",
        email=" ADMIN@Example.COM ",
    )
    assert found is not None and found.email == "admin@example.com"
