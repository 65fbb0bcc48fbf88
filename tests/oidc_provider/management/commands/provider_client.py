from django.core.management.base import BaseCommand
from oauth2_provider.models import Application


class Command(BaseCommand):
    help = "Register (or replace) the confidential OIDC client the console signs in with."

    def add_arguments(self, parser):
        parser.add_argument("client_id")
        parser.add_argument("--secret", required=True)
        parser.add_argument("--redirect-uris", required=True, help="space-separated")

    def handle(self, *args, client_id, secret, redirect_uris, **options):
        Application.objects.filter(client_id=client_id).delete()
        Application.objects.create(
            name="mirrorplane",
            client_id=client_id,
            client_secret=secret,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=redirect_uris,
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
