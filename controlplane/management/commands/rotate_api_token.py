from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from controlplane.core.tokens import api_token_rotate


class Command(BaseCommand):
    help = (
        "Issue a new API token for a user, replacing theirs, and print it: the only time it is shown "
        "(tokens are stored hashed). It expires after MIRRORPLANE_API_TOKEN_TTL_DAYS unless --expires-in-days."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--expires-in-days", type=int, default=None, help="0: never expires")

    def handle(self, *args, username, expires_in_days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}: create one with manage.py create_admin {username}")
        if expires_in_days is not None and not 0 <= expires_in_days <= 36_500:
            raise CommandError("--expires-in-days: give 0 (never) to 36500")
        key, token = api_token_rotate(user=user, actor=None, expires_in_days=expires_in_days)
        self.stdout.write(key)
        expiry = token.expires_at.isoformat() if token.expires_at else "never"
        self.stderr.write(f"token {token.prefix}… of {username} expires: {expiry}")
