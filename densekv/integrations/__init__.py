"""Framework backends for the session store, each behind its optional extra:

  densekv.integrations.flask      Flask's SessionInterface          pip install 'densekv[flask]'
  densekv.integrations.django     Django's SESSION_ENGINE           pip install 'densekv[django]'
  densekv.integrations.starlette  Starlette/FastAPI ASGI middleware pip install 'densekv[starlette]'

Each imports its framework only when imported itself.
"""
