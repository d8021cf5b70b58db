from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Print USERNAME's API token (created if missing), alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="create the user if missing")
        parser.add_argument("--rotate", action="store_true", help="replace an existing token")

    def handle(self, *args, username: str, create_user: bool = False, rotate: bool = False, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"no user {username!r}; pass --create-user to create one")
            user = User.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
            self.stderr.write(f"created user {username}")
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
