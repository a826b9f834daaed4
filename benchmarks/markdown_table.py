"""Turn benchmark JSON records (one per line, from stdin) into a markdown table:
rows = layout, columns = server, cells = the chosen field. The README's tables are made
with this, from records of a run, never typed by hand.

Usage: python benchmarks/session_memory.py | python benchmarks/markdown_table.py [--field bytes_per_item]
       [--row layout[,partitions,...]]   (several fields: one row per combination)

A record without the chosen field is left out (one stream may mix kinds of records, as
benchmarks/web_sessions.py's memory and timing records do). Without --row, a record's own
"table_row" (a list of its fields) names its row, else "layout".
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--field", default="bytes_per_item")
    ap.add_argument("--row", default=None)
    args = ap.parse_args()
    cells: dict[str, dict[str, str]] = {}
    servers: list[str] = []
    row_fields = args.row.split(",") if args.row else None
    header = args.row
    for line in sys.stdin:
        if not line.strip():
            continue
        rec = json.loads(line)
        if args.field not in rec:
            continue
        server = f"{rec['server']}"
        if server not in servers:
            servers.append(server)
        value = rec.get(args.field)
        fields = row_fields or rec.get("table_row") or ["layout"]
        header = header or ",".join(fields)
        row = " ".join(str(rec.get(f)) for f in fields)
        cells.setdefault(row, {})[server] = "-" if value is None else str(value)
    print("| " + (header or "layout") + " | " + " | ".join(servers) + " |")
    print("|---" * (len(servers) + 1) + "|")
    for row, by_server in cells.items():
        print(f"| {row} | " + " | ".join(by_server.get(s, "-") for s in servers) + " |")


if __name__ == "__main__":
    main()
