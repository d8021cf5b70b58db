"""The system account: the one user the reference probes are installed under, which no person
can sign up as, log in to or get an API token for (``leaderboard.accounts``).

    system_account_get_or_create   the account, made here the first time (inactive, unusable
                                   password, a SystemAccount row); a user of that name that this
                                   function did not create is refused
    system_account_get             the account, or None before the first install
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from leaderboard.accounts import SYSTEM_USERNAME
from leaderboard.errors import Conflict
from leaderboard.models import SystemAccount


def system_account_get():
    """The system account's user, or None when no install has made it yet."""
    account = SystemAccount.objects.select_related("user").first()
    return account.user if account is not None else None


@transaction.atomic
def system_account_get_or_create():
    """The system account's user. Made on the first call: a new user named ``SYSTEM_USERNAME``,
    inactive and with an unusable password, marked by a SystemAccount row. Raises Conflict when
    a user of that name (in any letter case) exists that is not the system account: someone else
    made it, and it must not own the reference probes."""
    user = system_account_get()
    if user is not None:
        return user
    User = get_user_model()
    squatter = User.objects.filter(username__iexact=SYSTEM_USERNAME).first()
    if squatter is not None:
        raise Conflict(
            f"a user {squatter.username!r} (id {squatter.pk}, joined {squatter.date_joined:%Y-%m-%d}) exists"
            " that the reference-probe install did not create, so it cannot own the reference probes;"
            " rename or delete that user in the admin, then run the install again",
            field="username",
        )
    user = User(username=SYSTEM_USERNAME, is_active=False, is_staff=False, is_superuser=False)
    user.set_unusable_password()
    user.save()
    SystemAccount.objects.create(user=user)
    return user
