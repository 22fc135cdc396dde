#!/usr/bin/env python3
"""The headline table of bench/gpu-table.sh: its parts, each measured in one call of the GPU
check's `table` suite, accumulated across calls (and leases) into one results file per device
model, `docs/results/gpu-table/<device>/gpu-table.json`.

The accumulated file is a `kplace-bisect-rate/4` results file, so `kplace plot` draws the whole
table: its `searches` are every part's searches, each named by its condition (`all-gpu`,
`all-gpu +gpu-hog`, `all-gpu x4 process`, `all-gpu x4 process mps`, as bisect-rate names them), numbered as repeats of
that system and size, each with the part it comes from (`part`), its condition and the bound
its answer met (`bound_met`); its trials' reports are paths under the part's directory. Beside
them, `parts` says of each part: its commit, device (name, UUID), driver, date, seconds, the
search settings, its sweeps and each size's ingest-only bound.

  gpu-table.py device PREFLIGHT_JSON          prints SLUG, UUID and NAME of device 0, tab-separated
  gpu-table.py measured ACCUMULATED PART      exit 0, saying when, where and at which commit, if
                                              PART is in ACCUMULATED; 1 if not
  gpu-table.py begin PART_JSON PART ID PREFLIGHT COMMIT SWEEP_LIMIT MPS_LIMIT SEARCH PLACEMENTS
  gpu-table.py end PART_JSON
  gpu-table.py merge BASE PART_DIR OUT        OUT: BASE (when it exists) and the part in PART_DIR
  gpu-table.py render ACCUMULATED             the table as Markdown (stdout)
  gpu-table.py collect SOURCE ROOT            the parts in SOURCE (a results.tar.gz, or a
                                              directory holding one or a table/ directory) copied
                                              under ROOT/<device>/ and merged into its
                                              gpu-table.json and table.md; prints each
                                              gpu-table.json it wrote
"""

import copy, datetime, glob, json, os, re, shutil, statistics, sys, tarfile, tempfile

SCHEMA = "kplace-bisect-rate/4"
TABLE = "kplace-gpu-table/1"
PART_SCHEMA = "kplace-gpu-table-part/1"
# An answer within this fraction of the ingest-only bound met that bound, not the pipeline's.
INGEST_SHARE = 0.9
CONDITIONS = {"alone": "alone", "hog": "beside the GPU hog", "mps-off": "MPS off", "mps-on": "MPS on"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def lines(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return rows


def text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", (name or "unknown device").lower()).strip("-") or "unknown-device"


def device0(preflight):
    devices = ((preflight or {}).get("driver") or {}).get("devices") or []
    return devices[0] if devices else {}


def cmd_device(preflight_path):
    d = device0(load(preflight_path))
    print("%s\t%s\t%s" % (slug(d.get("name")), d.get("uuid") or "unknown", d.get("name") or "unknown device"))
    return 0


def cmd_measured(acc_path, part):
    acc = load(acc_path)
    for p in (acc or {}).get("parts", []):
        if p.get("part") == part:
            dev = p.get("device") or {}
            print("part %s measured %s on %s (%s) at commit %s: %s" % (
                part, p.get("started"), dev.get("name"), dev.get("uuid"), p.get("commit"), p.get("dir")))
            return 0
    print("part %s not measured on this device yet" % part)
    return 1


def cmd_begin(path, part, pid, preflight_path, commit, sweep_limit, mps_limit, search, placements):
    pre = load(preflight_path) or {}
    d = device0(pre)
    cores = os.cpu_count()
    cpu = None
    for line in text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    write_json(path, {
        "schema": PART_SCHEMA, "part": part, "id": pid, "commit": commit,
        "device": {k: d.get(k) for k in ("name", "uuid", "pci_bus_id", "compute_capability",
                                         "total_memory_bytes", "multiprocessors")},
        "driver": {"nvidia": pre.get("nvidia_driver_version"),
                   "cuda": ((pre.get("driver") or {}).get("cuda_version"))},
        "persistence_mode": pre.get("persistence_mode"),
        "machine": {"cores": cores, "cpu": cpu, "rmem_max": pre.get("rmem_max")},
        "started": now(),
        "settings": {
            "bisect_rate": search, "placements": placements.split(","),
            "latency_budget": "deadline (bisect-rate's default)",
            "sweep_limit_s": int(sweep_limit), "mps_limit_s": int(mps_limit),
            "ingest_share": INGEST_SHARE,
        },
    })
    return 0


def cmd_end(path):
    p = load(path)
    p["ended"] = now()
    try:
        t0 = datetime.datetime.strptime(p["started"], "%Y-%m-%dT%H:%M:%SZ")
        t1 = datetime.datetime.strptime(p["ended"], "%Y-%m-%dT%H:%M:%SZ")
        p["seconds"] = int((t1 - t0).total_seconds())
    except (KeyError, ValueError):
        p["seconds"] = None
    write_json(path, p)
    return 0


def ingest_bounds(part_dir):
    """Each ingest-only measurement of the part: per receiver, what it and its burst sender said."""
    out = []
    for row in lines(os.path.join(part_dir, "ingest.jsonl")):
        receivers = []
        for i in range(int(row.get("pipelines", 1))):
            base = os.path.join(part_dir, "%s-%d" % (row["files"], i))
            said = text(base + ".txt")
            m = re.search(r"ingest only: (\d+) complete frames in ([0-9.]+) s: ([0-9.]+) frames/s", said)
            sent = re.search(r"sent (\d+) frames.* in ([0-9.]+) s: ([0-9.]+) frames/s", text(base + ".send.txt"))
            receivers.append({
                "complete_frames": int(m.group(1)) if m else None,
                "seconds": float(m.group(2)) if m else None,
                "per_s": float(m.group(3)) if m else None,
                "sender_per_s": float(sent.group(3)) if sent else None,
            })
        rates = [r["per_s"] for r in receivers if r["per_s"] is not None]
        out.append({
            "shape": row["cpi"], "pipelines": row.get("pipelines", 1), "frames": row.get("frames"),
            "rc": row.get("rc"), "seconds": row.get("seconds"), "receivers": receivers,
            # The bound per pipeline: the slowest receiver's rate (all of them at once).
            "per_pipeline_per_s": min(rates) if len(rates) == len(receivers) and rates else None,
            "sum_per_s": sum(rates) if len(rates) == len(receivers) and rates else None,
            "files": row.get("files"),
        })
    return out


def gpu_util(report):
    """The mean GPU utilisation a run report (or a multi-pipeline report's pipelines) saw, %."""
    if not isinstance(report, dict):
        return None
    reps = report.get("pipelines") if isinstance(report.get("pipelines"), list) else [report]
    vals = []
    for r in reps:
        for dv in ((r or {}).get("gpu_telemetry") or {}).get("devices", []) or []:
            v = dv.get("gpu_util_mean_pct")
            if isinstance(v, (int, float)):
                vals.append(v)
    return max(vals) if vals else None


def at_answer(search, sweep_dir):
    """The full-length trials at the answer: frames measured, seconds measured, GPU utilisation."""
    rate = search.get("sustained_rate")
    if rate is None:
        return None
    frames, seconds, utils, trials = 0, 0.0, [], 0
    for t in search.get("trials", []):
        if t.get("stage") != "final" or abs(t.get("rate", -1) - rate) > 1e-9 * max(rate, 1):
            continue
        m = t.get("measurement") or {}
        trials += 1
        frames += int(m.get("frames_completed") or 0)
        w = m.get("window") or {}
        seconds += float(w.get("secs", 0)) + float(w.get("nanos", 0)) / 1e9
        if t.get("report"):
            u = gpu_util(load(os.path.join(sweep_dir, t["report"])))
            if u is not None:
                utils.append(u)
    return {"trials": trials, "frames_measured": frames, "seconds_measured": round(seconds, 3),
            "gpu_util_mean_pct": round(max(utils), 1) if utils else None}


def bound_met(search, ingest):
    """Which bound the answer met: the sender's, the ingest path's, or the pipeline's own."""
    if search.get("skipped"):
        return {"kind": "skipped", "said": search["skipped"]}
    rate, kind = search.get("sustained_rate"), search.get("outcome_kind")
    bound = None
    for b in ingest:
        if b["shape"] == search.get("shape") and b["pipelines"] == search.get("pipelines", 1):
            bound = b.get("per_pipeline_per_s")
    if bound is None:
        for b in ingest:
            if b["shape"] == search.get("shape") and b["pipelines"] == 1:
                bound = b.get("per_pipeline_per_s")
    out = {"ingest_only_per_s": bound, "ratio_to_ingest": round(rate / bound, 3) if rate and bound else None}
    if rate is None:
        out.update(kind="none", said=search.get("outcome"))
    elif kind in ("trial_cap", "interrupted"):
        out.update(kind="unfinished", said="the search ended %s: the answer so far" % kind)
    elif kind == "sender_limit":
        out.update(kind="sender", said="the sender could not offer more here")
    elif bound and rate >= INGEST_SHARE * bound:
        out.update(kind="ingest", said="within %d%% of the ingest-only bound" % round(100 * (1 - INGEST_SHARE)))
    else:
        out.update(kind="pipeline", said="below the ingest-only bound: the placement's own limit")
    return out


def skeleton(device_name):
    return {"schema": SCHEMA, "table": TABLE,
            "machine": {"gpu": device_name, "note": "the headline table: each part's machine is in parts[]"},
            "settings": {"note": "each part's settings are in parts[]"},
            "parts": [], "searches": [], "spreads": [], "comparisons": []}


def spreads(searches):
    groups = {}
    for s in searches:
        if s.get("skipped"):
            continue
        groups.setdefault((s["system"], s["shape"]), []).append(s.get("sustained_rate"))
    out = []
    for (system, shape), rates in groups.items():
        if len(rates) < 2:
            continue
        got = sorted(r for r in rates if r is not None)
        med = statistics.median(got) if got else None
        out.append({"system": system, "shape": shape, "searches": len(rates), "measured": len(got),
                    "min": got[0] if got else None, "median": med, "max": got[-1] if got else None,
                    "spread": (got[-1] - got[0]) / med if got and med else None,
                    "probe_spread": None, "bounds_spread": None, "machine_spread": None,
                    "within_noise": False})
    return out


def cmd_merge(base_path, part_dir, out_path):
    part = load(os.path.join(part_dir, "part.json"))
    if not part:
        print("no part.json in %s" % part_dir, file=sys.stderr)
        return 1
    acc = load(base_path) if base_path and os.path.exists(base_path) else None
    acc = acc or skeleton((part.get("device") or {}).get("name"))
    acc["parts"] = [p for p in acc["parts"] if p.get("id") != part["id"]]
    acc["searches"] = [s for s in acc["searches"] if s.get("part") != part["id"]]
    rel = os.path.relpath(part_dir, os.path.dirname(os.path.abspath(out_path)))
    ingest = ingest_bounds(part_dir)
    repeats = {}
    for s in acc["searches"]:
        key = (s["system"], s["shape"])
        repeats[key] = max(repeats.get(key, -1), s.get("repeat", 0))
    sweeps = []
    for sw in lines(os.path.join(part_dir, "sweeps.jsonl")):
        entry = dict(sw)
        if sw.get("skipped"):
            sweeps.append(entry)
            continue
        sweep_dir = os.path.join(part_dir, sw["name"])
        res = load(os.path.join(sweep_dir, "bisect-rate.json"))
        entry["file"] = os.path.join(rel, sw["name"], "bisect-rate.json") if res else None
        if res is None:
            entry["error"] = "no results file (rc %s; %s.log)" % (sw.get("rc"), sw["name"])
            sweeps.append(entry)
            continue
        entry["searches"] = 0
        for s in res.get("searches", []):
            s = copy.deepcopy(s)
            # bisect-rate names a sweep under --mps on "... mps" itself; an older one did not.
            if sw.get("condition") == "mps-on" and not s["system"].endswith(" mps"):
                s["system"] += " mps"
            key = (s["system"], s["shape"])
            repeats[key] = repeats.get(key, -1) + 1
            s["repeat"] = repeats[key]
            s["part"], s["condition"], s["sweep"] = part["id"], sw.get("condition"), sw["name"]
            s["bound_met"] = bound_met(s, ingest)
            s["at_answer"] = at_answer(s, sweep_dir)
            for t in s.get("trials", []):
                if t.get("report"):
                    t["report"] = os.path.join(rel, sw["name"], t["report"])
            acc["searches"].append(s)
            entry["searches"] += 1
        for c in res.get("comparisons", []):
            c = dict(c, part=part["id"], sweep=sw["name"])
            acc["comparisons"].append(c)
        sweeps.append(entry)
    part = dict(part, dir=rel, sweeps=sweeps, ingest_only=ingest)
    acc["parts"].append(part)
    acc["spreads"] = spreads(acc["searches"])
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    write_json(out_path, acc)
    print("merged part %s (%d sweeps) into %s" % (part["id"], len(sweeps), out_path), file=sys.stderr)
    return 0


def fmt(v, spec="%.1f"):
    return spec % v if isinstance(v, (int, float)) and not isinstance(v, bool) else "n/a"


def cell(searches):
    """A table cell: the answer (median and range over several), the bound it met."""
    if not searches:
        return "not measured"
    if all(s.get("skipped") for s in searches):
        return "skipped: %s" % searches[-1]["skipped"]
    rates = [s.get("sustained_rate") for s in searches if not s.get("skipped")]
    got = sorted(r for r in rates if r is not None)
    kinds = sorted({(s.get("bound_met") or {}).get("kind", "?") for s in searches if not s.get("skipped")})
    if not got:
        return "no rate (%s)" % "; ".join(sorted({s.get("outcome_kind") or "?" for s in searches}))
    if len(rates) == 1:
        value = fmt(got[0])
    else:
        value = "%s (%s to %s, %d searches%s)" % (fmt(statistics.median(got)), fmt(got[0]), fmt(got[-1]), len(rates),
                                                  "" if len(got) == len(rates) else ", %d without a rate" % (len(rates) - len(got)))
    return "%s [%s]" % (value, ", ".join(kinds))


def render(acc):
    if not acc:
        return "# The headline table\n\n**Unmeasured**: no part of the table has run on a GPU yet.\n"
    md = ["# The headline table on %s" % ((acc.get("machine") or {}).get("gpu") or "a GPU"), "",
          "Sustained input rate over a paced UDP stream, every frame verified: the robust goal's "
          "answer of `kplace bisect-rate` (RFC 9971), searched as each part's settings say below. "
          "Each cell: the rate (median and range where searched more than once), then the bound "
          "it met: `pipeline` (below the ingest-only bound: the placement's own limit), `ingest` "
          "(within %d%% of the ingest-only bound, a burst into `kplace run --ingest-only`), "
          "`sender` (the sender could not offer more), `unfinished` (the search was cut off: the "
          "answer so far)." % round(100 * (1 - INGEST_SHARE)), ""]
    searches = acc.get("searches", [])
    fixed = [s for s in searches if s.get("condition") in ("alone", "hog")]
    if fixed:
        md += ["| placement | CPI | alone, CPI/s | beside the GPU hog, CPI/s |", "|---|---|---|---|"]
        keys = []
        for s in fixed:
            placement = os.path.splitext(os.path.basename(s.get("placement") or s["system"]))[0]
            if (placement, s["shape"]) not in keys:
                keys.append((placement, s["shape"]))
        for placement, shape in keys:
            def of(cond):
                return [s for s in fixed if s["shape"] == shape and s.get("condition") == cond
                        and os.path.splitext(os.path.basename(s.get("placement") or s["system"]))[0] == placement]
            md.append("| %s | %s | %s | %s |" % (placement, shape, cell(of("alone")), cell(of("hog"))))
        md.append("")
    mps = [s for s in searches if s.get("condition") in ("mps-off", "mps-on")]
    if mps:
        md += ["Four all-gpu pipelines at 2048x256, one process each, MPS off and on alternated "
               "(each round off, then on):", "",
               "| MPS | rounds | aggregate CPI/s per round | median (range) aggregate | bound met | GPU utilisation at the answer, % |",
               "|---|---|---|---|---|---|"]
        for cond in ("mps-off", "mps-on"):
            rows = [s for s in mps if s.get("condition") == cond]
            if not rows:
                continue
            agg = [s.get("aggregate_sustained_rate") for s in rows]
            got = sorted(a for a in agg if a is not None)
            md.append("| %s | %d | %s | %s | %s | %s |" % (
                "off" if cond == "mps-off" else "on", len(rows), " / ".join(fmt(a) for a in agg),
                "%s (%s to %s)" % (fmt(statistics.median(got)), fmt(got[0]), fmt(got[-1])) if got else "none",
                ", ".join(sorted({(s.get("bound_met") or {}).get("kind", "?") for s in rows})),
                " / ".join(fmt((s.get("at_answer") or {}).get("gpu_util_mean_pct")) for s in rows)))
        for p in acc.get("parts", []):
            for sw in p.get("sweeps", []):
                if sw.get("skipped"):
                    md.append("\n%s: skipped: %s" % (sw["name"], sw["skipped"]))
        md.append("")
    md += ["Parts (each one call of `bench/gpu-table.sh`):", "",
           "| part | started (UTC) | s | commit | device | UUID | sweeps | searches | search settings |",
           "|---|---|---|---|---|---|---|---|---|"]
    for p in acc.get("parts", []):
        dev = p.get("device") or {}
        st = p.get("settings") or {}
        md.append("| %s | %s | %s | %s | %s | %s | %d | %d | `%s`, sweeps cut at %s s (MPS %s s) |" % (
            p.get("part"), p.get("started"), fmt(p.get("seconds"), "%d"), p.get("commit"), dev.get("name"),
            dev.get("uuid"), len(p.get("sweeps", [])), sum(sw.get("searches", 0) for sw in p.get("sweeps", [])),
            st.get("bisect_rate"), st.get("sweep_limit_s"), st.get("mps_limit_s")))
    md += ["", "Ingest-only bounds (a burst of frames into `kplace run --ingest-only`, per receiver):", "",
           "| part | CPI | receivers at once | CPI/s per receiver (slowest) | sender CPI/s |", "|---|---|---|---|---|"]
    for p in acc.get("parts", []):
        for b in p.get("ingest_only", []):
            md.append("| %s | %s | %s | %s | %s |" % (
                p.get("part"), b["shape"], b["pipelines"], fmt(b.get("per_pipeline_per_s")),
                " / ".join(fmt(r.get("sender_per_s")) for r in b.get("receivers", []))))
    md += ["", "Searches (frames and seconds measured are those of the full-length trials at the answer):", "",
           "| part | system | CPI | answer, CPI/s per pipeline | ending | bound met | trials | s of trials | frames measured at the answer | s measured at the answer |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in searches:
        a = s.get("at_answer") or {}
        md.append("| %s | %s | %s | %s | %s | %s | %d | %s | %s | %s |" % (
            s.get("part"), s["system"], s["shape"], fmt(s.get("sustained_rate")), s.get("outcome_kind") or s.get("skipped"),
            (s.get("bound_met") or {}).get("kind"), len(s.get("trials", [])), fmt(s.get("trial_seconds")),
            fmt(a.get("frames_measured"), "%d"), fmt(a.get("seconds_measured"), "%.2f")))
    return "\n".join(md) + "\n"


def cmd_render(acc_path):
    sys.stdout.write(render(load(acc_path)))
    return 0


def cmd_collect(source, root):
    tmp = tempfile.mkdtemp(prefix="kplace-gpu-table.")
    try:
        table_dir = None
        if os.path.isdir(source) and os.path.isdir(os.path.join(source, "table")):
            table_dir = os.path.join(source, "table")
        else:
            tar = source if os.path.isfile(source) else os.path.join(source, "results.tar.gz")
            with tarfile.open(tar) as t:
                members = [m for m in t.getmembers() if m.name.lstrip("./").startswith("table/")
                           and (m.isfile() or m.isdir())]
                for m in members:
                    if os.path.isabs(m.name) or ".." in m.name.split("/"):
                        raise SystemExit("refusing member %s" % m.name)
                t.extractall(tmp, members=members)
            table_dir = os.path.join(tmp, "table")
        written = []
        for part_json in sorted(glob.glob(os.path.join(table_dir, "*", "*", "part.json"))):
            src = os.path.dirname(part_json)
            device = os.path.basename(os.path.dirname(src))
            dest = os.path.join(root, device, os.path.basename(src))
            if not os.path.exists(dest):
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.ready"))
            acc = os.path.join(root, device, "gpu-table.json")
            if cmd_merge(acc, dest, acc) != 0:
                return 1
            with open(os.path.join(root, device, "table.md"), "w") as f:
                f.write(render(load(acc)))
            if acc not in written:
                written.append(acc)
        if not written:
            print("no table part in %s" % source, file=sys.stderr)
            return 1
        for w in written:
            print(w)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    cmds = {"device": (cmd_device, 1), "measured": (cmd_measured, 2), "begin": (cmd_begin, 9),
            "end": (cmd_end, 1), "merge": (cmd_merge, 3), "render": (cmd_render, 1), "collect": (cmd_collect, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
