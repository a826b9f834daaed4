""""Your devices" in the web shells, written once: the label a login gives its session and
the id a view compares listed sessions with.

Every shell takes a `device_label` hook, a callable(request) -> str | None that the shell
calls at each login with the framework's request (Flask's and Quart's `request`, Django's
HttpRequest, Starlette's Request, aiohttp's web.Request); what it returns is the session's
label in `store.sessions_of(identity)` (a store made with track_devices=True). A label is
at most LABEL_MAX bytes of UTF-8: a longer one is cut at a character boundary here, so a
hook can never make a login fail. `user_agent_label` is a hook's usual body:

    device_label=lambda request: user_agent_label(request.headers.get("User-Agent"))

No dependency: a dozen substring tests over the User-Agent header, the browser family and
the operating system, nothing finer (a label is shown to the user, not used to decide).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from densekv.errors import InvalidArgument
from densekv.sessions.index import LABEL_MAX
from densekv.sessions.model import digest_of

__all__ = ["LABEL_MAX", "DeviceLabel", "check_device_label", "clip_label", "label_of", "session_id",
           "user_agent_label"]

DeviceLabel = Callable[[Any], "str | None"]

# (substring, family), the first found wins: the order matters (Edge's and Opera's
# User-Agents name Chrome and Safari too; Chrome's names Safari)
_BROWSERS = (
    ("Edg", "Edge"), ("OPR/", "Opera"), ("Opera", "Opera"), ("SamsungBrowser", "Samsung Internet"),
    ("Firefox/", "Firefox"), ("FxiOS", "Firefox"), ("CriOS", "Chrome"), ("Chromium", "Chromium"),
    ("Chrome/", "Chrome"), ("Safari/", "Safari"), ("MSIE ", "Internet Explorer"),
    ("Trident/", "Internet Explorer"), ("curl/", "curl"), ("python-requests", "Python"),
    ("python-httpx", "Python"), ("Python", "Python"), ("Go-http-client", "Go"), ("bot", "Bot"),
)
_SYSTEMS = (
    ("iPhone", "iOS"), ("iPad", "iPadOS"), ("Android", "Android"), ("CrOS", "ChromeOS"),
    ("Windows", "Windows"), ("Mac OS X", "macOS"), ("Macintosh", "macOS"), ("Linux", "Linux"),
    ("FreeBSD", "FreeBSD"),
)


def user_agent_label(ua: str | None) -> str:
    """A short label of a User-Agent header: "Firefox on Linux", "Safari on iOS", "Chrome"
    (no system named), "curl", or "Unknown device"; at most LABEL_MAX bytes."""
    ua = ua or ""
    browser = next((name for needle, name in _BROWSERS if needle in ua), None)
    system = next((name for needle, name in _SYSTEMS if needle in ua), None)
    if browser is None and system is None:
        return "Unknown device"
    if browser is None:
        return f"Browser on {system}"
    return browser if system is None else f"{browser} on {system}"


def clip_label(label: object) -> str | None:
    """`label` as a store takes it: None for None or "", else a str cut to LABEL_MAX bytes
    of UTF-8 at a character boundary (a lone surrogate replaced)."""
    if label is None:
        return None
    if not isinstance(label, str):
        raise InvalidArgument(f"a device_label hook returns a str or None, not {type(label).__name__}")
    raw = label.encode("utf-8", "replace")
    if len(raw) > LABEL_MAX:
        raw = raw[:LABEL_MAX]
    return raw.decode("utf-8", "ignore") or None


def label_of(hook: DeviceLabel | None, request: Any) -> str | None:
    """The label a login of `request` gives its session: the hook's answer, clipped."""
    return None if hook is None else clip_label(hook(request))


def check_device_label(hook: object, store_options: Mapping[str, Any], where: str) -> None:
    """At setup: a hook is callable, and a store built from `store_options` keeps labels."""
    if hook is None:
        return
    if not callable(hook):
        raise InvalidArgument(f"{where}: device_label is a callable(request) -> str | None, "
                              f"not {type(hook).__name__}")
    if not store_options.get("track_devices"):
        raise InvalidArgument(f"{where}: device_label needs track_devices=True in the store options "
                              "(a store keeps labels only then)")


def session_id(token: str | None) -> str | None:
    """The id the session of `token` is listed under (Session.id in sessions_of, what
    destroy_id takes), or None: compare it with a listed session's id to mark "this device"."""
    digest = digest_of(token)
    return None if digest is None else digest.hex()
