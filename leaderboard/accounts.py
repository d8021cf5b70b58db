"""Names no person may take: the system account the reference probes are installed under, names
that read as the site speaking (usernames), and the reference probes' names and slugs (probe names).

Names are compared by their *skeletons*: what Unicode's confusable detection (UTS #39, "Unicode
Security Mechanisms") reduces a string to, so that two strings that look alike have the same one.
The skeleton is ICU's (``icu.SpoofChecker.getSkeleton``, from Unicode's confusables.txt), taken of
the name case-folded, with and without NFKC first (NFKC turns some look-alikes into other letters:
the lunate sigma ``ϲ`` that passes for ``c`` becomes ``σ``), then case-folded again (the skeleton
of ``0`` is ``O``) with everything but letters and digits dropped: accents (the skeleton is
decomposed), ``.``, ``-``, ``_``, ``+``, ``@`` and spaces. Two names collide when any of their
skeletons are equal. So ``ProbeBench``, ``probe_bench``, ``PR0BEBENCH``, ``prоbebench`` (a Cyrillic
о), ``prօbebench`` (an Armenian օ) and ``ｐｒｏｂｅｂｅｎｃｈ`` are all the system name. A username
whose skeleton contains the system name's is refused too (``probebench-official``), since it would
pass for the maintainers on every probe it owns.

Refusing a name at sign-up only stops the obvious squat. What makes the system account the
system account is its ``leaderboard.SystemAccount`` row, which only
``leaderboard.services.accounts.system_account_get_or_create`` writes (the reference-probe install
calls it); the install refuses a user of that name that it did not create.
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import icu
import yaml
from django.conf import settings
from django.utils.text import slugify

from evaluator.commands.reference_probes.manifest import manifest_path

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

# ICU's checkers are safe to share between threads for reading (getSkeleton is such a call).
_SPOOF_CHECKER = icu.SpoofChecker()


def _skeleton(text: str) -> str:
    # the first argument (which table) is ignored since ICU 58: one table, confusables.txt's
    skeleton = _SPOOF_CHECKER.getSkeleton(0, text).casefold()
    return "".join(c for c in skeleton if c.isalnum())


def name_skeletons(name: str) -> frozenset[str]:
    """What ``name`` looks like: its skeletons (see the module's docstring), for comparing it with
    the reserved names. Two names collide when they share one."""
    folded = name.casefold()
    return frozenset(
        {
            _skeleton(folded),
            _skeleton(unicodedata.normalize("NFKC", folded).casefold()),
        }
    )


SYSTEM_SKELETON = _skeleton(SYSTEM_USERNAME)
_RESERVED_SKELETONS = frozenset().union(*(name_skeletons(n) for n in RESERVED))


def username_reserved(name: str) -> bool:
    """True when no person may sign up as ``name``."""
    skeletons = name_skeletons(name)
    return bool(skeletons & _RESERVED_SKELETONS) or any(SYSTEM_SKELETON in s for s in skeletons)


# --------------------------------------------------------------------------- probe names


@functools.lru_cache(maxsize=4)
def _reference_probe_skeletons(manifest: Path, mtime_ns: int) -> dict[str, str]:
    """skeleton → the manifest name it is reserved for: each entry's name, the slug the board
    gives that name, and the entry's slug in the manifest. ``mtime_ns`` keys the cache."""
    reserved: dict[str, str] = {}
    for entry in yaml.safe_load(manifest.read_text(encoding="utf-8"))["probes"]:
        for spelling in (entry["name"], slugify(entry["name"]), entry["slug"]):
            for skeleton in name_skeletons(spelling):
                reserved.setdefault(skeleton, entry["name"])
    return reserved


def reference_probe_names() -> dict[str, str]:
    """The reserved probe names: skeleton → the reference probe's name, from the registry's
    reference-probe manifest (empty when the registry has none)."""
    manifest = manifest_path(settings.REGISTRY_ROOT)
    try:
        mtime_ns = manifest.stat().st_mtime_ns
    except FileNotFoundError:
        return {}
    return _reference_probe_skeletons(manifest, mtime_ns)


def probe_name_reserved(name: str) -> str | None:
    """The name of the reference probe whose name or slug ``name`` takes (the name itself or the
    slug the board would give it, compared as usernames are), or None. Only the system account
    may submit a probe under such a name."""
    reserved = reference_probe_names()
    for spelling in (name, slugify(name)):
        for skeleton in name_skeletons(spelling):
            if skeleton in reserved:
                return reserved[skeleton]
    return None
