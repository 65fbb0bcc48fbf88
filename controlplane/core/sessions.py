"""Sessions: the cookie's form, and a signed-in session's maximum age.

`SessionCookieMiddleware` (before Django's SessionMiddleware) drops a session cookie that is not a session
key Django could have made (32 lowercase letters and digits): anything else names no session, and a
crafted one (a NUL byte) would make the session lookup itself fail (PostgreSQL refuses NUL in text) and
every request carrying it a 500, from the first middleware that reads the session.

A signed-in session's maximum age, counted from the sign-in: SESSION_COOKIE_AGE alone restarts whenever
the session is saved again (a form's message, the sign-in's `next`), so a browser left open could keep a
role for ever. `SessionAgeMiddleware` signs out a session older than SESSION_COOKIE_AGE, whatever happened
since; a user who signs in through the identity provider then asks the provider again, which is how
someone who left it loses the console. A session from before this rule is counted from its first request
after it."""

from __future__ import annotations

import logging
import re
import time

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

_SIGNED_IN_AT = "signed_in_at"
_SESSION_KEY = re.compile(r"[a-z0-9]{8,64}")
_log = logging.getLogger(__name__)


@receiver(user_logged_in)
def _stamp(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[_SIGNED_IN_AT] = time.time()


class SessionAgeMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            signed_in_at = request.session.setdefault(_SIGNED_IN_AT, time.time())
            if time.time() - signed_in_at > settings.SESSION_COOKIE_AGE:
                _log.info(
                    "the session of %s is older than SESSION_COOKIE_AGE: signed out", user.get_username()
                )
                logout(request)
        return self.get_response(request)


class SessionCookieMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        name = settings.SESSION_COOKIE_NAME
        value = request.COOKIES.get(name)
        if value is not None and not _SESSION_KEY.fullmatch(value):
            del request.COOKIES[name]  # no session: the response does not send it back either
        return self.get_response(request)
