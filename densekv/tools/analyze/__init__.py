"""`densekv analyze`: what densekv would save on a live server (or in a dump), per key pattern.

Modules, one job each (DESIGN.md, "Analyzer"):
  patterns.py   key name -> pattern ("session:{tok}"), rules, merging (pure)
  table.py      the streaming pattern table: counts, bytes, distributions (bounded memory)
  shapes.py     what a value is: integer, JSON, msgpack, pickle, session formats (pure)
  wire.py       the only way to the analyzed server: read-only commands, pipelined
  scan.py       read-only sampling of the live server: SCAN + pipelined per-key commands
  recommend.py  what densekv has for a pattern, and the command that moves it (pure)
  replay.py     copies of sampled keys measured on a scratch server, as they are and in
                the recommended layout, with the meter
  moves.py      what densekv would do with a pattern's keys, as loads of a sample
  estimate.py   extrapolation to the pattern's count, with 95% intervals (pure)
  report.py     terminal table, JSON, HTML
  offline.py    --rdb: dumps loaded into throwaway servers, analyzed as one keyspace
  resume_names.py  the key names a resume file needs, in FILE.names (mode 0600)
  run.py        the whole analysis, for the CLI (`densekv analyze`) and for callers
                (`densekv.tools.analyze.run.analyze(Options(url=...))`)
Nothing here is imported by `import densekv`: the analyzer loads only when used.
"""
