"""The system account the reference probes are installed under, and users' API tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class SystemAccount(models.Model):
    """Marks the one user the reference probes are installed under (``leaderboard.accounts``).
    Only ``services.accounts.system_account_get_or_create`` writes this row, together with the
    user it creates: inactive, with an unusable password, refused by the login backend and by the
    token service. The current eval-awareness reference is only ever a probe this user owns."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="system_account"
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"system account {self.user}"


def is_system_account(user) -> bool:
    """True for the system account (one indexed lookup; False for anonymous users)."""
    return bool(getattr(user, "pk", None)) and SystemAccount.objects.filter(user_id=user.pk).exists()


class ApiToken(models.Model):
    """A user's API key, stored as its SHA-256 only: the key is shown once, when it is made
    (``leaderboard.services.tokens.api_token_create``), and a stolen database does not let anyone in.
    ``prefix`` (the key's first characters) lets its owner recognise it on the account page."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    prefix = models.CharField(max_length=8)
    #: sha256(key), hex: every token-authenticated request looks it up (the unique index)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"API token {self.prefix}… of {self.user}"
