#!/usr/bin/env python3
"""check_dashboard.py - docs/grafana/lanesched.json is a dashboard Grafana can import and every
query in it is valid PromQL (CTest grafana_dashboard).

    tests/prometheus/check_dashboard.py DASHBOARD.json [METRICS.txt]

Checks: the JSON parses; it has a uid, a title and a datasource variable; panel ids are unique;
every panel but a row has targets, each with a refId and an expr. Each expr, with the Grafana
variables replaced ($model, $instance -> .*, $__rate_interval -> 5m), is written as a recording
rule and checked with `promtool check rules`. With METRICS.txt (a /metrics scrape), every
lanesched_ and process_ series a query names must be in the scrape (its _bucket, _sum or _count
for a histogram). Exit 0 when all hold, 1 with the reasons otherwise.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    with open(sys.argv[1], encoding="utf-8") as f:
        dash = json.load(f)
    for key in ("uid", "title", "panels"):
        if not dash.get(key):
            problems.append(f"no {key}")
    names = [v.get("name") for v in dash.get("templating", {}).get("list", [])]
    if "datasource" not in names:
        problems.append("no datasource variable")
    ids = [p.get("id") for p in dash.get("panels", [])]
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    exprs = []
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            continue
        if not p.get("targets"):
            problems.append(f"panel '{p.get('title')}' has no query")
        for t in p.get("targets", []):
            if not t.get("refId") or not t.get("expr"):
                problems.append(f"panel '{p.get('title')}': a target without refId or expr")
            else:
                exprs.append((p.get("title"), t["expr"]))
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, (_, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$model", ".*").replace("$instance", ".*")
        rules.append(f"      - record: dashboard:expr_{i}")
        rules.append("        expr: " + json.dumps(e))
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("\n".join(rules) + "\n")
        path = f.name
    try:
        r = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append("promtool check rules:\n" + r.stdout + r.stderr)
    finally:
        os.unlink(path)
    if len(sys.argv) == 3:
        with open(sys.argv[2], encoding="utf-8") as f:
            served = {line.split("{")[0].split(" ")[0] for line in f if line[:1].isalpha()}
        for title, e in exprs:
            for name in set(re.findall(r"\b(?:lanesched|process)_[a-z_]+", e)):
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                if name not in served and base + "_count" not in served:
                    problems.append(f"panel '{title}': {name} is not served")
    for p in problems:
        print("check_dashboard: " + p, file=sys.stderr)
    if not problems:
        print(f"check_dashboard: {len(exprs)} queries in {len(ids)} panels: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
