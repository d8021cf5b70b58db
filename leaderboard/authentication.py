"""``Authorization: Token <key>`` against keys stored as SHA-256 digests (leaderboard.ApiToken,
made by ``leaderboard.services.tokens``), the default authentication of the API; and the login
backend of the site and the admin. Neither lets the system account in (``leaderboard.accounts``)."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from leaderboard.models import ApiToken, is_system_account
from leaderboard.services.tokens import api_token_digest


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        token = ApiToken.objects.select_related("user").filter(digest=api_token_digest(key=key)).first()
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active or is_system_account(token.user):
            raise AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)


class AccountBackend(ModelBackend):
    """Django's username + password login, except for the system account: it is refused even if
    someone gave it a password or made it active in the admin, and a session it holds is not
    honoured (``get_user`` asks the same question)."""

    def user_can_authenticate(self, user) -> bool:
        return super().user_can_authenticate(user) and not is_system_account(user)
