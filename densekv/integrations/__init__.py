"""Framework backends for the session store, each behind its optional extra:

  densekv.integrations.flask      Flask's SessionInterface          pip install 'densekv[flask]'
  densekv.integrations.django     Django's SESSION_ENGINE           pip install 'densekv[django]'
  densekv.integrations.starlette  Starlette/FastAPI ASGI middleware pip install 'densekv[starlette]'
  densekv.integrations.aiohttp    aiohttp_session storage           pip install 'densekv[aiohttp]'
  densekv.integrations.quart      Quart's SessionInterface          pip install 'densekv[quart]'
  densekv.integrations.litestar   Litestar's session backend        pip install 'densekv[litestar]'

One page each in docs/ (flask.md, django.md, starlette.md, aiohttp.md, quart.md, litestar.md): install, configure
from a URL, login / logout / logout everywhere, testing, and every difference from the
framework's own backend with its reason.

Each imports its framework only when imported itself.
"""
