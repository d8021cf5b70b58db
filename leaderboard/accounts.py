"""Usernames no person may take: the system account the reference probes are installed under,
and names that read as the site speaking.

A name is compared by its *skeleton*: NFKC, case folded, accents dropped, common look-alike
letters and digits (Cyrillic and Greek homoglyphs, ``0``→``o``, ``1``/``i``→``l``, …) mapped to
one Latin letter, and separators (``.``, ``-``, ``_``, ``+``, ``@``, spaces) removed. So
``ProbeBench``, ``probe_bench``, ``PR0BEBENCH`` and ``prоbebench`` (a Cyrillic о) are all the
system name. Any name whose skeleton contains the system name's is refused too
(``probebench-official``), since it would pass for the maintainers on every probe it owns.

Refusing a name at sign-up only stops the obvious squat. What makes the system account the
system account is its ``leaderboard.SystemAccount`` row, which only
``leaderboard.services.accounts.system_account_get_or_create`` writes (the reference-probe install
calls it); the install refuses a user of that name that it did not create.
"""

from __future__ import annotations

import unicodedata

#: the username the reference probes are installed under
SYSTEM_USERNAME = "probebench"

#: names no person may sign up as (compared skeleton to skeleton, whole)
RESERVED = frozenset(
    {
        "admin",
        "administrator",
        "anonymous",
        "maintainer",
        "maintainers",
        "moderator",
        "official",
        "postmaster",
        "reference",
        "root",
        "security",
        "staff",
        "superuser",
        "support",
        "system",
        "webmaster",
    }
)

_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "ѕ": "s",
        "і": "l",
        "ї": "l",
        "ј": "j",
        "ԁ": "d",
        "ӏ": "l",
        "ь": "b",
        # Greek
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "n",
        "ι": "l",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        # digits and signs that pass for letters
        "0": "o",
        "1": "l",
        "i": "l",
        "|": "l",
        "!": "l",
        "3": "e",
        "4": "a",
        "5": "s",
        "$": "s",
        "7": "t",
        "8": "b",
        "9": "g",
    }
)


def username_skeleton(name: str) -> str:
    """What a username looks like, for comparing it with the reserved names."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = text.translate(_LOOKALIKES).replace("rn", "m").replace("vv", "w")
    return "".join(c for c in text if c.isalnum())


SYSTEM_SKELETON = username_skeleton(SYSTEM_USERNAME)
_RESERVED_SKELETONS = frozenset(username_skeleton(n) for n in RESERVED)


def username_reserved(name: str) -> bool:
    """True when no person may sign up as ``name``."""
    skeleton = username_skeleton(name)
    return skeleton in _RESERVED_SKELETONS or SYSTEM_SKELETON in skeleton
