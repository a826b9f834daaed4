"""Session containers under real HTTP load (issue 12, seed 003 rerun).

Seed 003 timed Rails session containers with `ab -c 5` while stored sessions grew; this
package does the same for a Flask app under gunicorn. The pieces, one job each:

  registry.py    the containers: what each one is and what it needs (pip, the Redis
                 target, memcached, PostgreSQL), in report order
  config.py      how the harness tells the app its container (environment variables)
  stores.py      the containers the app keeps itself: in-process dict, file per session
                 (flat or hashed directories), SQL (SQLite or PostgreSQL, indexed or not)
  app.py         the web app; its container is chosen at start-up by environment
                 variables (gunicorn runs `densekv.tools.lab.containers.app:create_app()`)
  backends.py    the harness's side of each container: start what it needs, bulk-load
                 N sessions, measure its bytes, run its housekeeping
  processes.py   the processes started (gunicorn, memcached, PostgreSQL): loopback
                 only, inside the run's directory, stopped on exit, error and Ctrl-C
  components.py  where memcached, wrk and PostgreSQL are (scripts/get-components or
                 the system install)
  load.py        the load generator: wrk with a Lua script that gives each request the
                 cookie of a random stored session; a pure-Python fallback without wrk
  harness.py     the measurement: every container filled to each N, then interleaved
                 rounds of read-only and read-write load, then housekeeping while serving
  findings.py    what a run found: the seed's verdict per container from its points
                 (Trend: falls or flat, by CPU per request), one sentence per finding
                 with its numbers, and the figures (CPU per request, req/s and p99
                 against N, bytes per session, housekeeping)

densekv itself never imports this package (it imports Flask, Flask-Session and the SQL
and memcached clients); `densekv lab --only containers` and
benchmarks/session_containers.py do.
"""
