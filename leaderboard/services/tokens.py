"""API tokens, stored hashed: make one (the key is returned once) or revoke it. Requests present
the key as ``Authorization: Token <key>``; ``leaderboard.authentication`` looks up its digest.

Keys are 40 random hex characters (160 bits, as DRF's authtoken made them), so a plain SHA-256 is
enough: there is nothing to guess, and the lookup stays one indexed query per request."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction

from leaderboard.errors import ValidationFailed
from leaderboard.models import ApiToken, is_system_account


def api_token_digest(*, key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@transaction.atomic
def api_token_create(*, user) -> str:
    """Give ``user`` a new API key (replacing any previous one, which stops working) and return
    it: the only time it exists in clear. The system account gets none (a 400)."""
    if is_system_account(user):
        raise ValidationFailed("user: the system account cannot have an API token", field="user")
    key = secrets.token_hex(20)
    ApiToken.objects.filter(user=user).delete()
    ApiToken.objects.create(user=user, prefix=key[:8], digest=api_token_digest(key=key))
    return key


def api_token_revoke(*, user) -> bool:
    """Delete ``user``'s API key; True if there was one."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return bool(deleted)
