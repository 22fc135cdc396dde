#!/usr/bin/env python3
"""The summary of bench/gpu-check.sh: judges the preflight, and rewrites summary.json and
table.md from the scratch directory after every step. After every step the summary is a
verdict on what ran (`failed`, else `incomplete` while steps have not run or were skipped for
time, else `passed`), so a call cut off midway still says what it found.

  gpu-check-summary.py preflight SCRATCH      exit 0 when the GPU path can run, 3 when not
  gpu-check-summary.py summary SCRATCH OUT    writes OUT/summary.json and OUT/table.md
"""

import glob, json, os, re, sys

def lines(path):
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None

def preflight(scratch):
    """Judges what the machine offers; exit 0 when the GPU path can run, 3 when not."""
    d = os.path.join(scratch, "preflight")
    devices = load(os.path.join(d, "devices.json"))
    missing = []
    libraries = []
    if devices is None:
        missing.append("kplace devices --json failed: %s" % (text(os.path.join(d, "devices.err")) or "no output"))
        devices = {}
    driver = devices.get("driver") or {}
    if driver and driver.get("status") != "ready":
        missing.append("CUDA driver: %s" % driver.get("reason", driver.get("status")))
    elif driver and not driver.get("devices"):
        missing.append("CUDA device: the driver reports none")
    if isinstance(devices.get("libraries"), list):
        libraries = devices["libraries"]
        found = {l.get("name"): l for l in libraries}
        # `kplace devices` names each library by its file stem (libcufft, libnvrtc, ...).
        for need, label in (("libcufft", "cuFFT"), ("libnvrtc", "NVRTC"), ("libnvrtc-builtins", "NVRTC builtins")):
            lib = found.get(need) or found.get(need[len("lib"):])
            if not lib or not lib.get("loaded"):
                tried = "; ".join("%s: %s" % (s.get("place"), s.get("result")) for s in (lib or {}).get("searched", []))
                missing.append("%s (%s) not found%s" % (label, need, (", searched " + tried) if tried else ""))
    else:
        # An older kplace: booleans only.
        for need, label in (("cufft", "cuFFT"), ("nvrtc", "NVRTC")):
            if devices and not devices.get(need):
                missing.append("%s not loadable" % label)
    libpath_rc = text(os.path.join(d, "library_path.rc"))
    tools = {}
    for line in (text(os.path.join(d, "tools.txt")) or "").splitlines():
        if line.endswith(": not found"):
            tools[line[: -len(": not found")]] = None
        else:
            tools[os.path.basename(line)] = line
    sanitizer = (text(os.path.join(d, "compute-sanitizer.txt")) or "").splitlines()
    smi = text(os.path.join(d, "nvidia-smi.txt"))
    fields = [v.strip() for v in (smi or "").splitlines()[0].split(",")] if smi else []
    result = {
        "usable": not missing,
        "missing": missing,
        "driver": driver,
        "nvidia_driver_version": devices.get("nvidia_driver_version"),
        "libraries": libraries or {k: devices.get(k) for k in ("cufft", "nvrtc") if k in devices},
        "library_path": text(os.path.join(d, "library_path.txt")) if libpath_rc == "0" else None,
        "nvidia_smi": smi,
        # The last field of the query: "Enabled" or "Disabled". Without persistence mode every
        # process that starts CUDA may pay for the driver's initialisation of the device.
        "persistence_mode": fields[-1] if len(fields) == 8 else None,
        # `kplace devices --json` cold (libraries, cuInit, a primary context) and warm.
        "timing": load(os.path.join(d, "timing.json")),
        "rmem_max": text(os.path.join(d, "rmem_max.txt")),
        "tools": tools,
        "compute_sanitizer": sanitizer[-1] if sanitizer and tools.get("compute-sanitizer") else None,
        "warnings": devices.get("warnings", []),
    }
    json.dump(result, open(os.path.join(scratch, "results", "preflight.json"), "w"), indent=1)
    print("preflight: " + ("the GPU path can run" if not missing else "cannot run: " + "; ".join(missing)))
    return 0 if not missing else 3

def libtest(path):
    body = text(path) or ""
    counts = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", body)
    return {
        "passed": sum(int(c[0]) for c in counts),
        "failed": sum(int(c[1]) for c in counts),
        "ignored": sum(int(c[2]) for c in counts),
        "skipped": len(re.findall(r"skipped: ", body)),
        "failures": re.findall(r"^test (\S+) \.\.\. FAILED", body, re.M)[:20],
    }

def stages(report):
    out = {}
    for st in (report or {}).get("stages", []):
        out[st["name"]] = {"device": st.get("device"), "host_ms": st.get("per_frame_ms"),
                           "gpu_ms": st.get("gpu_ms_per_frame")}
    return out

def bisect_rows(scratch):
    """Each search of the bisect step: system, answer per goal, ending, trials; and the ratios."""
    res = load(os.path.join(scratch, "bisect", "bisect-rate.json"))
    if not res:
        return None
    rows = []
    for se in res.get("searches", []):
        rows.append({
            "system": se["system"], "cpi": se["shape"], "skipped": se.get("skipped"),
            "sustained": se.get("sustained_rate"), "outcome": se.get("outcome"),
            "goals": {g["goal"]["name"]: {"lower": g.get("lower"), "upper": g.get("upper"),
                                          "ending": g["ending"]["kind"]} for g in se.get("goals", [])},
            "trials": len(se.get("trials", [])), "wall_s": se.get("wall_seconds"),
        })
    return {"searches": rows, "comparisons": res.get("comparisons", [])}

def summary(scratch, out):
    steps = {}
    for row in lines(os.path.join(scratch, "steps.jsonl")):
        steps[row["step"]] = row
    pre = load(os.path.join(scratch, "results", "preflight.json"))
    problems = []
    notes = []
    s = {"schema": "kplace-gpu-check/3", "steps": list(steps.values()), "preflight": pre}
    for row in steps.values():
        if row["rc"] in (124, 137):
            problems.append("step %s ran past its %d s budget (killed)" % (row["step"], row["budget_s"]))
        if row.get("skipped"):
            notes.append("step %s skipped: %s" % (row["step"], row["skipped"]))
    tests = lines(os.path.join(scratch, "results", "tests.jsonl"))
    for t in tests:
        t.update(libtest(os.path.join(scratch, t["log"])))
        if t["rc"] != 0 or t["failed"]:
            problems.append("test binary %s: rc %d, %d failed" % (t["test"], t["rc"], t["failed"]))
    s["tests"] = tests
    mc = lines(os.path.join(scratch, "results", "memcheck.jsonl"))
    memcheck = mc[-1] if mc else None
    if memcheck and memcheck.get("status") == "ran":
        body = text(os.path.join(scratch, memcheck["log"])) or ""
        m = re.search(r"ERROR SUMMARY: (\d+) error", body)
        memcheck["errors"] = int(m.group(1)) if m else None
        memcheck.update({k: v for k, v in libtest(os.path.join(scratch, memcheck["log"])).items() if k != "skipped"})
        refused = re.search(r"(?im)^.*(not supported|unsupported|could not be launched|failed to initialize).*$", body)
        if memcheck["errors"] is None and refused:
            memcheck.update(status="skipped", reason="compute-sanitizer refused: " + refused.group(0).strip())
        elif memcheck["errors"] is None and memcheck["rc"] in (124, 137):
            # Cut off under instrumentation before its summary: nothing was found either way.
            memcheck.update(status="inconclusive", reason="no ERROR SUMMARY within %s s (killed)" % memcheck.get("limit_s"))
            notes.append("memcheck inconclusive: " + memcheck["reason"])
        elif memcheck["errors"] == 0 and memcheck["rc"] == 0:
            memcheck["status"] = "clean"
        else:
            problems.append("memcheck: rc %d, %s errors" % (memcheck["rc"], memcheck["errors"]))
    s["memcheck"] = memcheck
    replay = lines(os.path.join(scratch, "results", "replay.jsonl"))
    for r in replay:
        rep = load(os.path.join(scratch, r["base"] + ".json"))
        r["throughput_cpi_per_s"] = rep.get("frames_per_s") if rep else None
        # What the process spent outside its measured frames: start-up (driver, context,
        # NVRTC, plans, pools) and the warm-up frames.
        wall = rep.get("wall_s") if rep else None
        r["outside_measured_s"] = round(r["seconds"] - wall, 3) if isinstance(wall, (int, float)) else None
        r["verified"] = rep.get("verification", {}).get("passed") if rep else None
        r["stages"] = stages(rep)
        if r["rc"] != 0:
            problems.append("replay %s %s %s: rc %d" % (r["placement"], r["cpi"], r["scene"], r["rc"]))
        cmp = load(os.path.join(scratch, r["base"] + ".compare.json"))
        if r.get("compare_rc") is not None:
            if cmp is None:
                r["comparison"] = {"error": text(os.path.join(scratch, r["base"] + ".compare.err"))}
                problems.append("replay %s %s %s: comparison failed" % (r["placement"], r["cpi"], r["scene"]))
            else:
                r["comparison"] = {k: cmp[k] for k in ("agree", "rule", "frames_compared", "frames_agreeing",
                    "cells_matched", "powers_identical", "max_relative", "only_in_reference",
                    "only_in_candidate", "frames_only_in_reference", "frames_only_in_candidate",
                    "differences")}
                r["comparison"]["listed"] = cmp["listed"][:50]
                if not cmp["agree"]:
                    problems.append("replay %s %s %s: %d differences from all-cpu" % (
                        r["placement"], r["cpi"], r["scene"], cmp["differences"]))
    s["replay"] = replay
    def stream_rows(name):
        rows = lines(os.path.join(scratch, "results", name + ".jsonl"))
        for r in rows:
            what = "%s %s" % (name, r.get("placement", r.get("case")))
            if r.get("skipped"):
                notes.append("%s: skipped: %s" % (what, r["skipped"]))
                continue
            rep = load(os.path.join(scratch, r["base"] + ".json")) if "base" in r else None
            if rep is None:
                r["error"] = r.get("error") or "no report (see %s.log)" % r.get("base")
                (notes if r.get("measurement") else problems).append("%s: no report" % what)
                continue
            agg = rep.get("aggregate", rep)
            pipes = rep.get("pipelines", [rep])
            r.update(
                processed_cpi_per_s=agg.get("frames_per_s"),
                frames=agg.get("frames"), partial=agg.get("partial_frames"), dropped=agg.get("dropped_frames"),
                post_cpi_p50_ms=rep.get("latency", {}).get("post_frame", {}).get("p50_ms"),
                post_cpi_p99_ms=agg.get("worst_post_frame_p99_ms", rep.get("latency", {}).get("post_frame", {}).get("p99_ms")),
                cores_used=agg.get("cores_used"),
                verified=agg.get("all_passed", rep.get("verification", {}).get("passed")),
                mps_clients=[(p.get("mps") or {}).get("is_client") for p in pipes if isinstance(p, dict)],
                gpu_util_mean_pct=[dv.get("gpu_util_mean_pct") for p in pipes if isinstance(p, dict)
                                   for dv in (p.get("gpu_telemetry") or {}).get("devices", [])][:1],
            )
            if r.get("case") == "MPS on":
                # MPS falls back silently: every pipeline must have been checked to be a client.
                for i, p in enumerate(p for p in pipes if isinstance(p, dict)):
                    mps = p.get("mps") or {}
                    if not mps.get("is_client"):
                        problems.append("share MPS on: pipeline %d is not an MPS client (%s)" % (i, mps.get("checked")))
            # Beside a co-tenant, frames lost to time slicing are the measurement itself.
            if not r.get("measurement") and (r.get("rc") != 0 or not r["verified"]):
                problems.append("%s %s: rc %s, verified %s" % (what, r.get("cpi", ""), r.get("rc"), r["verified"]))
            if r.get("hog"):
                hog = lines(os.path.join(scratch, r["hog"]))
                r["hog_tflops"] = hog[-1].get("tflops") if hog else None
        return rows
    s["streams"] = stream_rows("streams")
    copies = lines(os.path.join(scratch, "results", "copies.jsonl"))
    bus = next((c["bus"] for c in copies if "bus" in c), None)
    rates = [c for c in copies if "direction" in c]
    best = {}
    for c in rates:
        if c["gb_per_s"] > best.get(c["direction"], {}).get("gb_per_s", -1):
            best[c["direction"]] = c
    s["copies"] = {"bus": bus, "rates": rates, "best": best}
    if "copies" in steps and steps["copies"]["rc"] not in (None, 0):
        problems.append("copy rates: rc %d" % steps["copies"]["rc"])
    s["tune"] = (text(os.path.join(scratch, "tune", "tune-1024x128", "tune.txt")) or "").splitlines()
    if "tune" in steps and steps["tune"]["rc"] not in (None, 0):
        problems.append("tune: rc %d" % steps["tune"]["rc"])
    s["share"] = stream_rows("share")
    s["adapt"] = stream_rows("adapt")
    for r in s["adapt"]:
        rep = load(os.path.join(scratch, r["base"] + ".json")) if "base" in r else None
        a = (rep or {}).get("adaptation") or {}
        r["placements"], r["frames_per_placement"] = a.get("placements"), a.get("frames")
        r["switches"] = [(round(w["at_s"], 3), w["from"], w["to"], w["reason"]) for w in a.get("switches", [])]
        r["spilled_frames"] = a.get("spilled_frames")
        r["carry_moves"] = [st["carry"].get("moves") for st in (rep or {}).get("stages", []) if st.get("carry")]
        if r.get("carry") and rep is not None and not any(r["carry_moves"]):
            problems.append("%s: the carry never moved (switches %s)" % (r["case"], r["switches"]))
    s["admit"] = {"rows": lines(os.path.join(scratch, "results", "admit.jsonl")),
                  "account": (text(os.path.join(scratch, "admit", "admit.txt")) or "").splitlines()}
    if "admit" in steps and steps["admit"]["rc"] not in (None, 0):
        notes.append("admit: rc %s (1: the proof did not hold; logs/admit.txt)" % steps["admit"]["rc"])
    cupy = lines(os.path.join(scratch, "results", "cupy.jsonl"))
    for c in cupy:
        if c.get("skipped"):
            notes.append("cupy peer: skipped: " + c["skipped"])
            continue
        d = os.path.join(scratch, c["dir"])
        peer, ours, cmp = (load(os.path.join(d, f)) for f in ("result.json", "kplace.json", "compare.json"))
        c["cupy_cpi_per_s"] = peer.get("throughput_cpi_per_s") if peer else None
        c["kplace_all_gpu_cpi_per_s"] = ours.get("frames_per_s") if ours else None
        c["agree"] = cmp.get("agree") if cmp else None
        c["differences"] = cmp.get("differences") if cmp else None
        c["said"] = (text(os.path.join(scratch, "logs", "cupy-%s.txt" % c["cpi"])) or "").splitlines()[-3:]
        if c["rc"] != 0:
            problems.append("cupy peer %s: rc %d" % (c["cpi"], c["rc"]))
    s["cupy"] = cupy
    s["bisect"] = bisect_rows(scratch)
    if "bisect" in steps and steps["bisect"]["rc"] not in (None, 0, 3):
        notes.append("bisect-rate: rc %d (docs/bisect-rate.md)" % steps["bisect"]["rc"])
    ran = [st for st in STEPS if st in steps and steps[st]["rc"] is not None]
    skipped = [st for st in STEPS if st in steps and steps[st].get("skipped")]
    missing_steps = [st for st in STEPS if st not in steps]
    if pre is not None and not pre.get("usable"):
        s["status"], s["reason"] = "stopped", "the GPU path cannot run here: " + "; ".join(pre["missing"])
    elif pre is None and "preflight" in steps:
        row = steps["preflight"]
        why = ("skipped: " + row["skipped"]) if row.get("skipped") else "rc %s" % row["rc"]
        s["status"], s["reason"] = "stopped", "the preflight ended (%s) before judging the machine" % why
    elif problems:
        s["status"], s["reason"] = "failed", "; ".join(problems)
    elif missing_steps or skipped:
        s["status"] = "incomplete"
        s["reason"] = "no problem in %d step(s) run (%s); %s" % (len(ran), ", ".join(ran), "; ".join(
            (["not reached: " + ", ".join(missing_steps)] if missing_steps else [])
            + (["skipped: " + ", ".join(skipped)] if skipped else [])))
    else:
        s["status"], s["reason"] = "passed", "every step passed"
    s["problems"] = problems
    s["notes"] = notes
    write(out, "summary.json", json.dumps(s, indent=1))
    write(out, "table.md", table(s))

STEPS = ["preflight", "tests", "replay", "streams", "copies", "tune", "share", "adapt", "admit", "cupy", "memcheck", "bisect"]

def write(out, name, body):
    with open(os.path.join(out, name), "w") as f:
        f.write(body + "\n")

def f(v, fmt="%.1f"):
    return fmt % v if isinstance(v, (int, float)) and not isinstance(v, bool) else ("" if v is None else str(v))

def table(s):
    md = ["# kplace GPU check", "", "**%s**: %s" % (s["status"], s["reason"]), ""]
    pre = s.get("preflight") or {}
    if pre:
        drv = pre.get("driver") or {}
        devs = ", ".join("%s (cc %s.%s, %.0f GiB)" % (d["name"], d["compute_capability"]["major"], d["compute_capability"]["minor"],
                         d["total_memory_bytes"] / 2**30) for d in drv.get("devices", []))
        md += ["| preflight | |", "|---|---|",
               "| driver | %s, CUDA %s, NVIDIA %s |" % (drv.get("status"), (drv.get("cuda_version") or {}).get("major", "?"), pre.get("nvidia_driver_version")),
               "| devices | %s |" % (devs or "none"),
               "| libraries | %s |" % (", ".join("%s %s" % (l.get("name"), l.get("version") or ("found" if l.get("loaded") else "**missing**"))
                                                for l in pre["libraries"]) if isinstance(pre.get("libraries"), list)
                                      else json.dumps(pre.get("libraries"))),
               "| nvidia-smi | %s |" % f(pre.get("nvidia_smi")).replace("\n", "; "),
               "| rmem_max | %s |" % f(pre.get("rmem_max")),
               "| tools | %s |" % ", ".join("%s %s" % (k, v if v else "**no**") for k, v in pre.get("tools", {}).items()),
               "| persistence mode | %s |" % f(pre.get("persistence_mode")),
               "| `kplace devices` cold / warm s | %s |" % (" / ".join(f((pre.get("timing") or {}).get(k), "%.2f") for k in ("devices_cold_s", "devices_warm_s"))),
               "| missing | %s |" % ("; ".join(pre.get("missing", [])) or "nothing"), ""]
    md += ["| step | budget s | took s | rc | |", "|---|---|---|---|---|"]
    md += ["| %s | %s | %s | %s | %s |" % (r["step"], r["budget_s"], f(r["seconds"], "%d"), f(r["rc"], "%d"),
            ("skipped: " + r["skipped"]) if r.get("skipped") else
            ("ended %s leftover process(es)" % r["leftover_processes"]) if r.get("leftover_processes") else "")
           for r in s["steps"]]
    if s.get("notes"):
        md += ["", "notes: " + "; ".join(s["notes"])]
    if s.get("tests"):
        md += ["", "| test binary | runs | rc | passed | failed | skipped | failures |", "|---|---|---|---|---|---|---|"]
        md += ["| %s | %s | %d | %d | %d | %d | %s |" % (t["test"], t.get("runs", 1), t["rc"], t["passed"], t["failed"], t["skipped"], " ".join(t["failures"])) for t in s["tests"]]
    if s.get("bisect"):
        md += ["", "| bisect-rate | CPI | answer (the first goal) | every goal | trials, s |", "|---|---|---|---|---|"]
        for r in s["bisect"]["searches"]:
            md.append("| %s | %s | %s | %s | %s, %s |" % (
                r["system"], r["cpi"], r["skipped"] and ("skipped: " + r["skipped"]) or r["outcome"],
                "; ".join("%s %s (%s)" % (k, f(v["lower"]), v["ending"]) for k, v in r["goals"].items()),
                r["trials"], f(r["wall_s"], "%d")))
        for c in s["bisect"]["comparisons"]:
            md.append("\nratio %s / %s (%s goal): %s (bounds allow %s to %s)" % (
                c["system"], c["baseline"], c["goal"], f(c.get("ratio"), "%.3f"),
                f(c.get("ratio_low"), "%.3f"), f(c.get("ratio_high"), "%.3f")))
    if s.get("memcheck"):
        m = s["memcheck"]
        md += ["", "memcheck: %s%s" % (m.get("status"), ", rc %s, %s errors, %s tests passed" % (m.get("rc"), m.get("errors"), m.get("passed"))
                                        if m.get("status") in ("ran", "clean") else ": " + str(m.get("reason")))]
    if s.get("replay"):
        md += ["", "| placement | CPI | scene | run | CPI/s | process s (outside measured frames) | host ms/frame per stage | GPU ms/frame per stage | vs all-cpu |",
               "|---|---|---|---|---|---|---|---|---|"]
        for r in s["replay"]:
            c = r.get("comparison")
            if c is None:
                vs = "(reference)" if r["placement"] == "all-cpu" else "not compared"
            elif "error" in c:
                vs = "**error**: %s" % c["error"]
            elif c["agree"]:
                vs = "agree (%s; %d/%d powers identical, max rel %.1e)" % (c["rule"], c["powers_identical"], c["cells_matched"], c["max_relative"])
            else:
                vs = "**DIFFER** (%s): %d differences, first: %s" % (c["rule"], c["differences"],
                     "; ".join("frame %s %s" % (d["frame"], d["kind"]) for d in c["listed"][:3]))
            md.append("| %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s |" % (
                r["placement"], r["cpi"], r["scene"], "ok" if r["rc"] == 0 else "**rc %d**" % r["rc"],
                f(r.get("throughput_cpi_per_s")), f(r["seconds"], "%.2f"), f(r.get("outside_measured_s"), "%.2f"),
                ", ".join("%s %s" % (k, f(v["host_ms"], "%.3f")) for k, v in r["stages"].items()),
                ", ".join("%s %s" % (k, f(v["gpu_ms"], "%.3f")) for k, v in r["stages"].items() if v["gpu_ms"] is not None),
                vs))
    for key, title in (("streams", "UDP streams"), ("share", "sharing (2048x256, all-gpu)"),
                       ("adapt", "kplace run --adapt beside the GPU hog")):
        if s.get(key):
            md += ["", "%s:" % title, "",
                   "| case | CPI | offered CPI/s | processed CPI/s | frames / partial / dropped | post-CPI p50 / p99 ms | cores | verified | MPS clients | hog TFLOP/s |",
                   "|---|---|---|---|---|---|---|---|---|---|"]
            for r in s[key]:
                if r.get("skipped"):
                    md.append("| %s | | | skipped: %s | | | | | | |" % (r.get("placement", r.get("case")), r["skipped"]))
                    continue
                if "error" in r:
                    md.append("| %s | %s | %s | **%s** (rc %s) | | | | | | |" % (r.get("placement", r.get("case")), r.get("cpi", "2048x256"), f(r.get("rate")), r["error"], r.get("rc")))
                    continue
                md.append("| %s | %s | %s | %s | %s / %s / %s | %s / %s | %s | %s | %s | %s |" % (
                    r.get("placement", r.get("case")), r.get("cpi", "2048x256"), f(r.get("rate", 150)), f(r["processed_cpi_per_s"]),
                    r["frames"], r["partial"], r["dropped"], f(r["post_cpi_p50_ms"], "%.3f"), f(r["post_cpi_p99_ms"], "%.3f"),
                    f(r["cores_used"], "%.2f"), "yes" if r["verified"] else "**no**", r.get("mps_clients"), f(r.get("hog_tflops"))))
    cp = s.get("copies") or {}
    if cp.get("rates"):
        bus = cp.get("bus")
        md += ["", "pinned copies%s:" % (" (PCIe gen %s x%s, nominal %.1f GB/s per direction)" % (bus["pcie_gen"], bus["pcie_width"], bus["nominal_gb_per_s_per_direction"]) if bus else ""), "",
               "| direction | best GB/s | at bytes | fraction of nominal |", "|---|---|---|---|"]
        for d, c in cp["best"].items():
            md.append("| %s | %s | %d | %s |" % (d, f(c["gb_per_s"], "%.2f"), c["bytes"], f(c.get("fraction_of_nominal"), "%.2f")))
    for r in s.get("adapt") or []:
        if r.get("placements"):
            md += ["", "adapted: placements %s, frames %s, spilled %s, switches (s, from, to, why) %s%s" % (
                r["placements"], r["frames_per_placement"], r["spilled_frames"], r["switches"],
                ", carry moves %s" % r["carry_moves"] if r.get("carry_moves") else "")]
    if (s.get("admit") or {}).get("account"):
        md += ["", "kplace admit:", ""] + ["    " + l for l in s["admit"]["account"]]
    if s.get("tune"):
        md += ["", "kplace tune at 1024x128 (predictions, not proven):", ""] + [l for l in s["tune"] if l.startswith("|") or l.startswith("kplace tune")]
    if s.get("cupy"):
        md += ["", "| CuPy peer | rc | CuPy CPI/s | kplace all-gpu CPI/s | detections |", "|---|---|---|---|---|"]
        for c in s["cupy"]:
            if c.get("skipped"):
                md.append("| | | skipped: %s | | |" % c["skipped"])
                continue
            md.append("| %s | %d | %s | %s | %s |" % (c["cpi"], c["rc"], f(c["cupy_cpi_per_s"]), f(c["kplace_all_gpu_cpi_per_s"]),
                      {True: "agree", False: "**%s differences**" % c["differences"], None: " ".join(c["said"])}[c["agree"]]))
    return "\n".join(md)

if __name__ == "__main__":
    if sys.argv[1] == "preflight":
        sys.exit(preflight(sys.argv[2]))
    summary(sys.argv[2], sys.argv[3])
