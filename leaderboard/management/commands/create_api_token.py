from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from leaderboard.accounts import username_reserved
from leaderboard.errors import ServiceError
from leaderboard.models import ApiToken
from leaderboard.services.tokens import api_token_create


class Command(BaseCommand):
    help = (
        "Make a new API token for USERNAME and print it, alone on stdout (messages go to stderr). Only a hash is "
        "stored, so the key is printed this once; a previous token of the user stops working."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="create the user if missing")
        parser.add_argument(
            "--rotate", action="store_true", help="(kept for old scripts: every run makes a new token)"
        )

    def handle(self, *args, username: str, create_user: bool = False, rotate: bool = False, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"no user {username!r}; pass --create-user to create one")
            if username_reserved(username):
                raise CommandError(f"the username {username!r} is reserved; choose another")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
            self.stderr.write(f"created user {username}")
        if ApiToken.objects.filter(user=user).exists():
            self.stderr.write(f"{username}'s previous API token was replaced and no longer works")
        try:
            key = api_token_create(user=user)
        except ServiceError as exc:
            raise CommandError(f"{username}: {exc.message}") from None
        self.stdout.write(key)
