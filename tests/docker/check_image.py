#!/usr/bin/env python3
"""check_image.py - what CI can check of docker/ without a container engine (CTest docker_image).

    tests/docker/check_image.py DOCKER_DIR BIN_DIR ALERTS_YML

1. Every shared library that the binaries the runtime stage copies (lanesched, lanesched-ctl,
   lanesched-produce, lanesched-consume) link, as ldd lists them on the binaries built here,
   belongs (dpkg -S) to a package the runtime stage installs, or to the base image (a package of
   priority required or essential, or one they depend on), or, for a library pulled in by
   another library, to a dependency of those. A library linked directly must come from a listed or base package. Every
   listed package exists under that name in this machine's Debian, whose release must be the
   image's (the names differ between releases).
2. docker/compose.yaml: NATS runs with JetStream (-js), lanesched holds leases in a bucket
   (LANESCHED_LEASE_BUCKET with LANESCHED_MODELS), Prometheus mounts docker/prometheus.yml and
   the alert rules where prometheus.yml loads them, and scrapes lanesched's metrics port.
3. docker/prometheus.yml passes `promtool check config` (with the rules at their local path).
4. The Dockerfile's HEALTHCHECK asks the container's own daemon (/healthz on the metrics port),
   not a NATS-wide ping. CTest ops_healthcheck runs the command itself.

Exit 0 when everything holds, 1 with one line per problem.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

PROBLEMS = []


def problem(text):
    PROBLEMS.append(text)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def dockerfile_stages(path):
    """{stage name: [instruction lines with continuations joined]} and the FROM image of each."""
    stages, images, cur = {}, {}, None
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", s, re.I)
        if m:
            cur = (m.group(2) or m.group(1)).lower()
            stages[cur] = []
            images[cur] = m.group(1)
            continue
        if cur is not None:
            stages[cur].append(s)
    return stages, images


def runtime_packages(lines):
    pkgs = []
    for s in lines:
        if not s.upper().startswith("RUN"):
            continue
        for cmd in s[3:].split("&&"):
            words = shlex.split(cmd)
            if "apt-get" in words and "install" in words:
                for w in words[words.index("install") + 1:]:
                    if not w.startswith("-"):
                        pkgs.append(w)
    return pkgs


def runtime_binaries(lines):
    bins = []
    for s in lines:
        m = re.match(r"COPY\s+--from=\S+\s+(.*)\s+\S+/$", s, re.I)
        if m:
            bins += [os.path.basename(p) for p in m.group(1).split()]
    return bins


def installed_packages():
    """{package: (priority, essential, [[alternatives] of Depends + Pre-Depends])}"""
    r = run(["dpkg-query", "-W", "-f=${Package}\t${Priority}\t${Essential}\t${Depends}, "
             "${Pre-Depends}\t${db:Status-Abbrev}\n"])
    out = {}
    for line in r.stdout.splitlines():
        name, prio, ess, deps, status = (line.split("\t") + [""] * 5)[:5]
        if not status.startswith("ii"):
            continue
        alts = []
        for dep in deps.split(","):
            dep = dep.strip()
            if dep:
                alts.append([re.split(r"[\s(:]", a.strip())[0] for a in dep.split("|")])
        out[name] = (prio, ess == "yes", alts)
    return out


def dependency_closure(pkgs, roots):
    """roots and everything they depend on, as installed here."""
    closure, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in closure or p not in pkgs:
            continue
        closure.add(p)
        for alts in pkgs[p][2]:
            todo += [a for a in alts if a in pkgs]
    return closure


def package_of(path):
    real = os.path.realpath(path)
    cands = [path, real]
    for p in (path, real):
        cands.append(p[4:] if p.startswith("/usr/") else "/usr" + p)
    for c in cands:
        r = run(["dpkg-query", "-S", c])
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def check_libraries(docker_dir, bin_dir):
    stages, images = dockerfile_stages(os.path.join(docker_dir, "Dockerfile"))
    if "runtime" not in stages:
        problem("Dockerfile: no stage named runtime")
        return
    listed = runtime_packages(stages["runtime"])
    binaries = runtime_binaries(stages["runtime"])
    if not listed or not binaries:
        problem(f"Dockerfile runtime stage: packages {listed}, binaries {binaries}")
        return
    image = images["runtime"]
    codename = ""
    for line in open("/etc/os-release", encoding="utf-8"):
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
    if codename not in image:
        problem(f"the runtime image is {image} but this machine is Debian {codename}: package "
                "names cannot be checked here")
        return
    pkgs = installed_packages()
    for p in listed:
        if p not in pkgs:
            problem(f"Dockerfile runtime stage installs {p}, which is not a package of Debian "
                    f"{codename} installed here")
    base = dependency_closure(pkgs, [n for n, (prio, ess, _) in pkgs.items()
                                     if prio == "required" or ess])
    closure = dependency_closure(pkgs, [p for p in listed if p in pkgs] + sorted(base))
    seen = {}
    for b in binaries:
        path = os.path.join(bin_dir, b)
        if not os.access(path, os.X_OK):
            problem(f"{path}: not built")
            continue
        needed = set(re.findall(r"NEEDED\s+(\S+)", run(["objdump", "-p", path]).stdout))
        for line in run(["ldd", path]).stdout.splitlines():
            m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
            if not m:
                continue
            soname, lib = m.groups()
            pkg = package_of(lib)
            direct = soname in needed
            if pkg is None:
                problem(f"{b}: {soname} ({lib}) belongs to no Debian package")
            elif direct and pkg not in listed and pkg not in base:
                problem(f"{b} links {soname} from {pkg}, which the runtime stage does not "
                        "install (add it to the apt-get install list)")
            elif pkg not in closure:
                problem(f"{b}: {soname} from {pkg} is neither installed by the runtime stage "
                        "nor a dependency of what it installs")
            seen[soname] = (pkg, "listed" if pkg in listed else "base" if pkg in base
                            else "dependency")
    for soname, (pkg, how) in sorted(seen.items()):
        print(f"check_image: {soname:24} {pkg or '?':18} {how}")


def check_compose(docker_dir, alerts):
    compose = yaml.safe_load(open(os.path.join(docker_dir, "compose.yaml"), encoding="utf-8"))
    services = compose.get("services", {})
    for name in ("nats", "lanesched", "prometheus"):
        if name not in services:
            problem(f"compose.yaml: no {name} service")
    if PROBLEMS:
        return
    if "-js" not in services["nats"].get("command", []):
        problem("compose.yaml: nats runs without JetStream (-js): --lease-bucket needs it")
    env = services["lanesched"].get("environment", {})
    if not env.get("LANESCHED_LEASE_BUCKET") or not env.get("LANESCHED_MODELS"):
        problem("compose.yaml: lanesched holds no lease (LANESCHED_LEASE_BUCKET and "
                "LANESCHED_MODELS)")
    port = str(env.get("LANESCHED_METRICS_LISTEN", "")).rsplit(":", 1)[-1]
    if not port.isdigit():
        problem("compose.yaml: lanesched has no LANESCHED_METRICS_LISTEN port")
    mounts = {}
    for v in services["prometheus"].get("volumes", []):
        src, dst = v.split(":")[:2]
        mounts[dst] = src
        if src.startswith(".") and not os.path.exists(os.path.join(docker_dir, src)):
            problem(f"compose.yaml: prometheus mounts {src}, which does not exist")
    prom_path = os.path.join(docker_dir, "prometheus.yml")
    prom = yaml.safe_load(open(prom_path, encoding="utf-8"))
    if os.path.normpath(os.path.join(docker_dir, mounts.get("/etc/prometheus/prometheus.yml",
                                                            ""))) != os.path.normpath(prom_path):
        problem("compose.yaml: prometheus does not mount docker/prometheus.yml")
    rules = prom.get("rule_files", [])
    for r in rules:
        src = mounts.get(r)
        if src is None or os.path.realpath(os.path.join(docker_dir, src)) != os.path.realpath(
                alerts):
            problem(f"prometheus.yml loads {r}, which compose.yaml does not mount from "
                    f"{alerts}")
    targets = [t for sc in prom.get("scrape_configs", []) if sc.get("job_name") == "lanesched"
               for c in sc.get("static_configs", []) for t in c.get("targets", [])]
    if f"lanesched:{port}" not in targets:
        problem(f"prometheus.yml: job lanesched does not scrape lanesched:{port} ({targets})")
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        local = dict(prom)
        local["rule_files"] = [os.path.abspath(alerts)]
        yaml.safe_dump(local, f)
        tmp = f.name
    try:
        r = run(["promtool", "check", "config", tmp])
        if r.returncode != 0:
            problem("promtool check config docker/prometheus.yml:\n" + r.stdout + r.stderr)
    finally:
        os.unlink(tmp)


def check_healthcheck(docker_dir):
    stages, _ = dockerfile_stages(os.path.join(docker_dir, "Dockerfile"))
    hc = [s for s in stages.get("runtime", []) if s.upper().startswith("HEALTHCHECK")]
    if len(hc) != 1:
        problem("Dockerfile: the runtime stage needs one HEALTHCHECK")
        return
    cmd = json.loads(hc[0][hc[0].index("CMD") + 3:].strip())
    text = " ".join(cmd)
    if "/healthz" not in text or "ping" in cmd:
        problem(f"Dockerfile HEALTHCHECK does not ask this container's /healthz: {cmd}")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    docker_dir, bin_dir, alerts = sys.argv[1:]
    check_libraries(docker_dir, bin_dir)
    check_compose(docker_dir, alerts)
    check_healthcheck(docker_dir)
    for p in PROBLEMS:
        print("check_image: " + p, file=sys.stderr)
    if not PROBLEMS:
        print("check_image: runtime libraries, compose.yaml, prometheus.yml and the healthcheck: ok")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
