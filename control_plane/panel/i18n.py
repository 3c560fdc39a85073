"""The panel's nine languages: catalogs, the reader's choice, and CLDR formatting.

The `.po` files under `locales/` are the source; they are compiled in memory when the panel is
built (no `.mo` files to forget to rebuild). A language is chosen by the reader (a cookie that
outlives the session), else by the browser's `Accept-Language`, else English.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from functools import cache
from pathlib import Path

from babel import Locale, dates, numbers, units
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

__all__ = [
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "LOCALES_DIR",
    "Language",
    "choose_language",
    "language_names",
    "translations_for",
]

LOCALES_DIR = Path(__file__).resolve().parent / "locales"
DOMAIN = "messages"
DEFAULT_LANGUAGE = "en"
# The order of the language menu: each language named in itself.
LANGUAGES = ("nl", "en", "de", "fr", "es", "it", "pt", "pl", "sv")


def language_names() -> dict[str, str]:
    names = {}
    for code in LANGUAGES:
        name = Locale.parse(code).get_display_name(code) or code
        names[code] = name[:1].upper() + name[1:]
    return names


@cache
def translations_for(code: str) -> Translations:
    """The compiled catalog of `code` (English too: its catalog is the reviewed wording)."""
    if code not in LANGUAGES:
        raise ValueError(f"language: {code!r} is not one of {LANGUAGES}")
    with (LOCALES_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as po:
        catalog = read_po(po, locale=code, domain=DOMAIN)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Translations(compiled, domain=DOMAIN)


@cache
def _skeleton_pattern(code: str, skeleton: str) -> str:
    """The language's CLDR pattern for a skeleton, as `dates.format_skeleton` finds it: matched
    once, where babel matches it against every pattern of the language on each call (a few
    milliseconds: a page of fifty agents spent half its time there)."""
    locale = Locale.parse(code)
    if skeleton not in locale.datetime_skeletons:
        skeleton = dates.match_skeleton(skeleton, locale.datetime_skeletons) or skeleton
    pattern: str = locale.datetime_skeletons[skeleton].pattern
    return pattern


# A language's weight as RFC 9110 writes it: 0 to 1, at most three decimals, ASCII digits
# (`float` alone also reads `2`, `inf`, `1e3`, `1_0`, a sign, spaces and other scripts' digits).
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


def _accepted(header: str) -> list[str]:
    """`Accept-Language` as language codes, most preferred first (q=0 means "not this")."""
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate(header.split(",")[:30]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        params = params.strip()
        if params.startswith("q="):
            if _QVALUE.fullmatch(params[2:]) is None:
                continue
            quality = float(params[2:])
        if tag and quality > 0:
            ranked.append((-quality, position, tag.strip().lower()))
    return [tag for _, _, tag in sorted(ranked)]


def choose_language(chosen: str | None, accept_language: str | None) -> str:
    if chosen in LANGUAGES:
        return chosen
    for tag in _accepted(accept_language or ""):
        primary = tag.split("-")[0]
        if primary in LANGUAGES:
            return primary
    return DEFAULT_LANGUAGE


@dataclass(frozen=True)
class Language:
    """One reader's language: translated messages and CLDR formatting of dates, times, numbers."""

    code: str

    @property
    def translations(self) -> Translations:
        return translations_for(self.code)

    def gettext(self, message: str, **values: object) -> str:
        text = self.translations.gettext(message)
        return text % values if values else text

    def ngettext(self, singular: str, plural: str, n: int, **values: object) -> str:
        text = self.translations.ngettext(singular, plural, n)
        return text % {"num": n, **values}

    def time(self, instant: datetime, zone: tzinfo) -> str:
        """The local clock reading, CLDR's short form: "3:00 AM" in English, "03:00" in Dutch."""
        return dates.format_time(instant, "short", tzinfo=zone, locale=self.code)

    def time_with_zone(self, instant: datetime, zone: tzinfo) -> str:
        """ "03:00 CET": the zone's abbreviation at that instant, as the clock on the wall says."""
        local = instant.astimezone(zone)
        return f"{self.time(instant, zone)} {local.tzname()}"

    def day(self, day: date) -> str:
        """ "28 March", "28. März": the day and month, for notes inside a sentence."""
        return dates.format_datetime(day, _skeleton_pattern(self.code, "MMMMd"), locale=self.code)

    def weekday_day(self, day: date) -> str:
        """ "Sunday, 28 March": a night in the preview."""
        pattern = _skeleton_pattern(self.code, "MMMMEEEEd")
        return dates.format_datetime(day, pattern, locale=self.code)

    def moment(self, instant: datetime, zone: tzinfo) -> str:
        """A date and time with the zone's abbreviation, CLDR's medium form."""
        local = instant.astimezone(zone)
        shown = dates.format_datetime(local, "medium", tzinfo=zone, locale=self.code)
        return f"{shown} {local.tzname()}"

    def number(self, value: float) -> str:
        return numbers.format_decimal(value, locale=self.code)

    def duration(self, length: timedelta) -> str:
        """ "3 days 2 hours", "3 Tage 2 Stunden": a length of time in whole days and hours (hours
        alone under a day, days alone from ten days on; minutes under an hour), CLDR's long
        units."""
        days, seconds = divmod(round(length.total_seconds()), 86_400)
        hours, minutes = seconds // 3_600, seconds % 3_600 // 60
        parts = [(days, "duration-day")] if days else []
        if hours and days < 10:
            parts.append((hours, "duration-hour"))
        if not parts:
            parts.append((minutes, "duration-minute"))
        return " ".join(
            units.format_unit(value, unit, length="long", locale=self.code) for value, unit in parts
        )
