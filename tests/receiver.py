"""A local HTTP receiver for alert notifications, started by the tests: records every POST (when, path,
JSON body) and answers with `status`, or never answers (`hang`), as a broken webhook endpoint does."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    at: float
    path: str
    body: dict


class _HttpService:
    """A ThreadingHTTPServer on `host` serving `handler` in a thread while the `with` block runs."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> None:
        self.server = ThreadingHTTPServer((host, 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()


class Receiver(_HttpService):
    def __init__(self, *, status: int = 200, hang: bool = False) -> None:
        self.status, self.hang = status, hang
        self.received: list[Received] = []
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                receiver.received.append(Received(time.time(), self.path, body))
                if receiver.hang:
                    receiver._release.wait(60)
                    return
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"ok" if receiver.status < 400 else b"broken")

            def log_message(self, *args) -> None:  # quiet
                pass

        self._serve(Handler)

    def __exit__(self, *exc_info) -> None:
        self._release.set()
        super().__exit__(*exc_info)

    def bodies(self, path: str | None = None) -> list[dict]:
        return [r.body for r in self.received if path is None or r.path == path]


class SmtpReceiver:
    """A minimal SMTP server (HELO/EHLO, MAIL, RCPT, DATA, QUIT) that keeps each message it accepts, so
    Django's SMTP backend talks to a real socket; `messages` holds (recipients, raw text)."""

    def __init__(self) -> None:
        import socketserver

        self.messages: list[tuple[list[str], str]] = []
        self.connections = 0  # every connection accepted, a message sent or not
        receiver = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(f"{line}\r\n".encode())

            def handle(self) -> None:
                receiver.connections += 1
                self.reply("220 localhost test SMTP")
                recipients: list[str] = []
                while line := self.rfile.readline().decode(errors="replace").strip():
                    verb = line.split(" ", 1)[0].upper()
                    if verb in ("EHLO", "HELO"):
                        self.reply("250 localhost")
                    elif verb == "RCPT":
                        recipients.append(line.split(":", 1)[1].strip(" <>"))
                        self.reply("250 OK")
                    elif verb == "DATA":
                        self.reply("354 end with <CRLF>.<CRLF>")
                        lines = []
                        while (data := self.rfile.readline().decode(errors="replace")).rstrip("\r\n") != ".":
                            lines.append(data)
                        receiver.messages.append((recipients, "".join(lines)))
                        recipients = []
                        self.reply("250 OK queued")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:  # MAIL, RSET, NOOP
                        self.reply("250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SmtpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass(frozen=True)
class Heard:
    method: str
    path: str
    headers: dict[str, str]


class Listener(_HttpService):
    """An HTTP service of the test's own standing in for a hostile one (a registry, a webhook receiver,
    another service's port): every request is recorded (method, path, headers) and answered with `status`,
    `body` and `headers` (a redirect's Location), on `host` (another loopback address is another machine's
    service to the outbound policy)."""

    def __init__(
        self, *, host: str = "127.0.0.1", status: int = 200, body: bytes = b"{}", headers: dict | None = None
    ) -> None:
        self.heard: list[Heard] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                listener.heard.append(Heard(self.command, self.path, dict(self.headers)))
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args) -> None:
                pass

        self._serve(Handler, host)
