"""``Authorization: Token <key>`` against keys stored as SHA-256 digests (leaderboard.ApiToken,
made by ``leaderboard.services.tokens``). The default authentication of the API (settings)."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from leaderboard.models import ApiToken
from leaderboard.services.tokens import api_token_digest


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        token = ApiToken.objects.select_related("user").filter(digest=api_token_digest(key=key)).first()
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)
