from django.core.management.base import BaseCommand

from controlplane import core
from controlplane.core.roles import Role


class Command(BaseCommand):
    help = (
        "Create (or promote) a user with a role, admin by default, and print a new API token (shown once: "
        "tokens are stored hashed; it replaces the one they had)."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--role", choices=[role.group_name for role in Role], default=Role.ADMIN.group_name
        )
        parser.add_argument("--password", help="for session login on the web; omit for token-only users")

    def handle(self, *args, username, role, password, **options):
        _, token = core.user_create_with_role(username=username, role=Role.from_name(role), password=password)
        self.stdout.write(token)
