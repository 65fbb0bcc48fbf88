from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a provider user (or set a changed password) and make --groups their only groups."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--password", required=True)
        parser.add_argument("--groups", default="", help="comma-separated")

    def handle(self, *args, username, password, groups, **options):
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        if not user.check_password(password):  # a new hash would end the user's session at the provider
            user.set_password(password)
            user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups.split(",") if name])
