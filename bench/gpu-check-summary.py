#!/usr/bin/env python3
"""The summary of bench/gpu-check.sh: judges the preflight and each path of the smoke step,
and rewrites summary.json and table.md from the scratch directory after every step. After every
step the summary is a verdict on what ran (`failed`, else `incomplete` while steps have not run
or were skipped for time, else `passed`), so a call cut off midway still says what it found.
Every measured row states its frames measured after the warm-up, the seconds measured and the
UUID of the device it ran on, and carries its run report's `overhead`; the summary states the
bundle's commit, the call's date and its device.

  gpu-check-summary.py preflight SCRATCH              exit 0 when the GPU path can run, 3 when not
  gpu-check-summary.py smoke KIND SCRATCH ARGS...     one smoke path's verdict: PASS, FAIL or SKIP,
                                                      a tab, and the reason, on one line
  gpu-check-summary.py summary SCRATCH OUT            writes OUT/summary.json and OUT/table.md
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

def device_of(pre):
    """Device 0 as the preflight found it: name and UUID (every GPU run uses GPU 0)."""
    devices = (((pre or {}).get("driver") or {}).get("devices")) or []
    d = devices[0] if devices else {}
    return {"name": d.get("name"), "uuid": d.get("uuid"), "pci_bus_id": d.get("pci_bus_id")}

def measured(rep, device):
    """What a run report (one pipeline or several) measured: frames after the warm-up, seconds
    measured, the device's UUID (the report's telemetry, else the preflight's device 0) and
    where the runtime's own time went (`overhead`, per pipeline for several)."""
    if not isinstance(rep, dict):
        return {"measured_frames": None, "measured_s": None, "device_uuid": None, "overhead": None}
    pipes = [p for p in rep.get("pipelines", []) if isinstance(p, dict) and "measured_frames" in p] \
        if isinstance(rep.get("pipelines"), list) else [rep]
    frames = [p.get("measured_frames") for p in pipes]
    walls = [p.get("wall_s") for p in pipes if isinstance(p.get("wall_s"), (int, float))]
    uuids = [dv.get("uuid") for p in pipes for dv in ((p.get("gpu_telemetry") or {}).get("devices") or []) if dv.get("uuid")]
    over = [p.get("overhead") for p in pipes]
    return {
        "measured_frames": sum(frames) if frames and all(isinstance(f, int) for f in frames) else None,
        "measured_s": round(max(walls), 3) if walls else None,
        "device_uuid": uuids[0] if uuids else device.get("uuid"),
        "device_uuid_from": "report" if uuids else "preflight",
        "overhead": over[0] if len(over) == 1 else over,
    }

# ---------------------------------------------------------------------------------------------
# The smoke step's judges: one verdict per GPU path, PASS, FAIL or SKIP with the reason.

SMOKE_PATHS = [
    "radar all-gpu against all-cpu",
    "blocks on CUDA: beamformer-filtered against the CPU blocks",
    "blocks on CUDA: spectrogram-blocks against the CPU blocks",
    "a constant tensor on the GPU (the weighted beamformer's weights)",
    "the FIR's carry moving GPU to CPU and back under --adapt",
    "NVML gauges in --metrics",
    "one bisect-rate trial of all-gpu",
    "kplace admit --prove",
]

def said_last(scratch, path):
    """The last line of a log that says something, for a failure's reason."""
    body = [l.strip() for l in (text(os.path.join(scratch, path)) or "").splitlines() if l.strip()]
    return body[-1][:200] if body else "nothing said"

def verified(scratch, rc, report_path):
    """(None, facts) when a checked run passed, else (why, {})."""
    rep = load(os.path.join(scratch, report_path))
    if rep is None:
        d = os.path.dirname(report_path)
        log = os.path.join(d, "run.log") if os.path.exists(os.path.join(scratch, d, "run.log")) \
            else report_path[: -len(".json")] + ".log"
        return "rc %s, no report (%s: %s)" % (rc, log, said_last(scratch, log)), {}
    v = rep.get("verification") or {}
    if str(rc) != "0" or not v.get("passed"):
        return "rc %s, verification %s: %s" % (rc, "passed" if v.get("passed") else "failed",
                                                "; ".join(v.get("reasons", [])[:2]) or "no reason given"), {}
    return None, {"frames": rep.get("frames"), "measured": rep.get("measured_frames"), "wall_s": rep.get("wall_s"),
                  "against": v.get("against"), "passed": v.get("frames_passed"), "rep": rep}

def smoke(kind, scratch, *args):
    """The verdict of one smoke path, as (verdict, reason)."""
    if kind == "radar":
        ref_rc, rc, d = args
        why, ref = verified(scratch, ref_rc, os.path.join(d, "all-cpu.json"))
        if why:
            return "FAIL", "the all-cpu reference: " + why
        why, got = verified(scratch, rc, os.path.join(d, "all-gpu.json"))
        if why:
            return "FAIL", "all-gpu: " + why
        cmp = load(os.path.join(scratch, d, "compare.json"))
        if cmp is None:
            return "FAIL", "the comparison failed: " + said_last(scratch, os.path.join(d, "compare.err"))
        if not cmp.get("agree"):
            return "FAIL", "%s differences from all-cpu's detections (%s)" % (cmp.get("differences"), cmp.get("rule"))
        return "PASS", "%s frames verified against the scene, %s measured after the warm-up at %.1f CPI/s; detections agree with all-cpu's (%s, max rel %.1e)" % (
            got["frames"], got["measured"], (got["rep"].get("frames_per_s") or 0), cmp.get("rule"), cmp.get("max_relative") or 0)
    if kind in ("checked", "constant"):
        rc, report = args[0], args[1]
        if kind == "constant":
            plan = text(os.path.join(scratch, args[2])) or ""
            if not re.search(r"constant weights .*uploaded once", plan):
                return "FAIL", "the plan does not upload the constant: " + (plan.strip().splitlines() or ["no plan"])[-1][:200]
        why, got = verified(scratch, rc, report)
        if why:
            return "FAIL", why
        return "PASS", "%s frames checked against %s, all passed (%s measured after the warm-up in %.3f s)%s" % (
            got["frames"], got["against"], got["measured"], got["wall_s"] or 0,
            "; the plan uploads the constant once before the first frame" if kind == "constant" else "")
    if kind == "carry":
        said = []
        for rc, report in (args[0:2], args[2:4]):
            why, got = verified(scratch, rc, report)
            name = os.path.basename(report)[: -len(".json")]
            if why:
                return "FAIL", "%s: %s" % (name, why)
            moves = [st["carry"].get("moves") for st in got["rep"].get("stages", []) if st.get("carry")]
            if not any(moves):
                return "FAIL", "%s: the carry never moved (switches: %d)" % (
                    name, len(((got["rep"].get("adaptation") or {}).get("switches")) or []))
            frames = (got["rep"].get("adaptation") or {}).get("frames")
            said.append("%s: carry moved %d time(s), frames per placement %s" % (name, max(moves), frames))
        return "PASS", "; ".join(said) + "; every frame checked against the CPU run"
    if kind == "metrics":
        rc, report, scrape, port = args
        if port == "none":
            return "FAIL", "no metrics address in the run's log (rc %s)" % rc
        body = text(os.path.join(scratch, scrape)) or ""
        gauges = [l for l in body.splitlines() if l.startswith(("kplace_gpu_utilization_ratio{", "kplace_gpu_memory_used_bytes{"))]
        rep = load(os.path.join(scratch, report)) or {}
        if not gauges:
            tel = rep.get("gpu_telemetry") or {}
            if tel and tel.get("available") is False:
                return "SKIP", "NVML is not available here, so no GPU gauge: %s" % tel.get("reason")
            return "FAIL", "no GPU gauge in the %d bytes scraped from port %s (rc %s)" % (len(body), port, rc)
        if str(rc) != "0" or not (rep.get("verification") or {}).get("passed"):
            return "FAIL", "the gauges were served (%s), but the stream's run failed: rc %s" % (gauges[0], rc)
        return "PASS", "scraped %s; the stream's %s frames verified" % ("; ".join(gauges[:2]), rep.get("frames"))
    if kind == "bisect":
        rc, results = args
        res = load(os.path.join(scratch, results))
        if res is None:
            return "FAIL", "no results file (rc %s): %s" % (rc, said_last(scratch, "smoke/bisect.log"))
        se = (res.get("searches") or [{}])[0]
        if se.get("skipped"):
            return "FAIL", "all-gpu skipped: " + se["skipped"]
        trials = se.get("trials") or []
        if not trials:
            return "FAIL", "no trial ran (rc %s): %s" % (rc, se.get("outcome"))
        t = trials[0]
        m = t.get("measurement") or {}
        if t.get("status") != "passed":
            return "FAIL", "the trial at %.1f CPI/s %s: %s" % (t.get("rate", 0), t.get("status"),
                                                              "; ".join(t.get("failures") or []) or t.get("invalid") or "no reason given")
        return "PASS", "one trial at %.1f CPI/s passed: %s of %s frames completed, post-frame p99 %.3f ms (budget %.1f ms)" % (
            t["rate"], m.get("frames_completed"), m.get("frames_sent"), ((t.get("latency") or {}).get("p99_ms") or 0), t.get("budget_ms") or 0)
    if kind == "admit":
        rc, account = args
        body = (text(os.path.join(scratch, account)) or "").splitlines()
        proof = [l for l in body if l.startswith("proof:")]
        fit = [l for l in body if " fit" in l and not l.startswith(" ")]
        if str(rc) not in ("0", "1") or not proof:
            return "FAIL", "rc %s, %s: %s" % (rc, "no proof in its account" if body else "no account",
                                              said_last(scratch, "smoke/admit.log"))
        return "PASS", "%s%s (rc %s)" % ((fit[-1] + "; ") if fit else "", proof[-1], rc)
    return "FAIL", "no judge for %s" % kind

def bisect_rows(scratch, device):
    """Each search of the bisect step: system, answer per goal, ending, trials, the frames and
    seconds its trials measured, the device; and the ratios."""
    res = load(os.path.join(scratch, "bisect", "bisect-rate.json"))
    if not res:
        return None
    rows = []
    for se in res.get("searches", []):
        trials = se.get("trials", [])
        rows.append({
            "system": se["system"], "cpi": se["shape"], "skipped": se.get("skipped"),
            "sustained": se.get("sustained_rate"), "outcome": se.get("outcome"),
            "goals": {g["goal"]["name"]: {"lower": g.get("lower"), "upper": g.get("upper"),
                                          "ending": g["ending"]["kind"]} for g in se.get("goals", [])},
            "trials": len(trials), "wall_s": se.get("wall_seconds"),
            "measured_s": se.get("trial_seconds"),
            "measured_frames": sum(int((t.get("measurement") or {}).get("frames_completed") or 0) for t in trials),
            "device_uuid": device.get("uuid"), "results": "bisect/bisect-rate.json",
        })
    return {"searches": rows, "comparisons": res.get("comparisons", [])}

def summary(scratch, out):
    steps = {}
    for row in lines(os.path.join(scratch, "steps.jsonl")):
        steps[row["step"]] = row
    pre = load(os.path.join(scratch, "results", "preflight.json"))
    call = load(os.path.join(scratch, "call.json")) or {}
    suite = call.get("suite", "check")
    device = device_of(pre)
    problems = []
    notes = []
    s = {"schema": "kplace-gpu-check/4", "suite": suite, "commit": call.get("commit"), "date": call.get("date"),
         "limit_s": call.get("limit_s"), "device": device, "steps": list(steps.values()), "preflight": pre}
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
    smoke_rows = lines(os.path.join(scratch, "results", "smoke.jsonl"))
    for r in smoke_rows:
        if r["verdict"] == "FAIL":
            problems.append("smoke: %s: %s" % (r["path"], r["reason"]))
        elif r["verdict"] == "SKIP":
            notes.append("smoke: %s: skipped: %s" % (r["path"], r["reason"]))
    if "smoke" in steps and steps["smoke"]["rc"] is not None:
        seen = {r["path"] for r in smoke_rows}
        for path in SMOKE_PATHS:
            if path not in seen:
                smoke_rows.append({"path": path, "verdict": "FAIL", "reason": "not reached: the step ended first (rc %s)" % steps["smoke"]["rc"],
                                   "seconds": None})
                problems.append("smoke: %s: not reached" % path)
    s["smoke"] = smoke_rows
    replay = lines(os.path.join(scratch, "results", "replay.jsonl"))
    for r in replay:
        rep = load(os.path.join(scratch, r["base"] + ".json"))
        r["throughput_cpi_per_s"] = rep.get("frames_per_s") if rep else None
        r.update(measured(rep, device))
        r["report"] = r["base"] + ".json" if rep else None
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
            r.update(measured(rep, device))
            r["report"] = r["base"] + ".json"
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
        c.update(measured(ours, device))
        c["agree"] = cmp.get("agree") if cmp else None
        c["differences"] = cmp.get("differences") if cmp else None
        c["said"] = (text(os.path.join(scratch, "logs", "cupy-%s.txt" % c["cpi"])) or "").splitlines()[-3:]
        if c["rc"] != 0:
            problems.append("cupy peer %s: rc %d" % (c["cpi"], c["rc"]))
    s["cupy"] = cupy
    s["bisect"] = bisect_rows(scratch, device)
    if "bisect" in steps and steps["bisect"]["rc"] not in (None, 0, 3):
        notes.append("bisect-rate: rc %d (docs/bisect-rate.md)" % steps["bisect"]["rc"])
    if suite == "table":
        s["table"] = table_summary(scratch, problems, notes)
    order = SUITES.get(suite, SUITES["check"])
    ran = [st for st in order if st in steps and steps[st]["rc"] is not None]
    # The table's parts not asked for are not missing: each call measures the parts it is given.
    skipped = [st for st in order if st in steps and steps[st].get("skipped")
               and not (suite == "table" and steps[st]["skipped"].startswith("not selected"))]
    missing_steps = [st for st in order if st not in steps]
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

SUITES = {
    "check": ["preflight", "smoke", "tests", "replay", "streams", "copies", "tune", "share", "adapt", "admit", "cupy",
              "memcheck", "bisect"],
    "table": ["preflight", "alone", "hog", "mps"],
}

def table_summary(scratch, problems, notes):
    """The table suite's parts in this call: each measured (its sweeps, the accumulated table) or
    already measured on this device model."""
    rows = lines(os.path.join(scratch, "results", "table.jsonl"))
    for r in rows:
        if r.get("status") == "already measured":
            notes.append("table part %s: %s" % (r["part"], r.get("said")))
            continue
        sweeps = lines(os.path.join(scratch, r["dir"], "sweeps.jsonl"))
        r["sweeps"] = sweeps
        for sw in sweeps:
            if sw.get("skipped"):
                notes.append("table part %s: %s skipped: %s" % (r["part"], sw["name"], sw["skipped"]))
            elif sw.get("rc") == 130:
                notes.append("table part %s: %s cut off at its %s s limit: the answers so far" % (r["part"], sw["name"], sw.get("limit_s")))
            elif sw.get("rc") not in (0, 1, 3):
                problems.append("table part %s: sweep %s: rc %s (%s.log)" % (r["part"], sw["name"], sw.get("rc"), sw["name"]))
        if r.get("merge_rc") != 0:
            problems.append("table part %s: merging into the accumulated table failed (logs/table-merge-%s.txt)" % (r["part"], r["part"]))
    accumulated = next((r["accumulated"] for r in reversed(rows) if r.get("accumulated")), None)
    rendered = text(os.path.join(scratch, os.path.dirname(accumulated), "table.md")) if accumulated else None
    return {"parts": rows, "accumulated": accumulated, "rendered": rendered}

STEPS = SUITES["check"]

def write(out, name, body):
    with open(os.path.join(out, name), "w") as f:
        f.write(body + "\n")

def f(v, fmt="%.1f"):
    return fmt % v if isinstance(v, (int, float)) and not isinstance(v, bool) else ("" if v is None else str(v))

def table(s):
    title = "kplace GPU check" if s.get("suite", "check") == "check" else "kplace GPU table (bench/gpu-table.sh)"
    dev = s.get("device") or {}
    md = ["# " + title, "", "**%s**: %s" % (s["status"], s["reason"]), "",
          "bundle commit %s, call began %s (UTC), device %s (%s)" % (s.get("commit"), s.get("date"), dev.get("name"), dev.get("uuid")), ""]
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
    if s.get("smoke"):
        md += ["", "| smoke: GPU path | verdict | s | reason |", "|---|---|---|---|"]
        md += ["| %s | %s | %s | %s |" % (r["path"], r["verdict"] if r["verdict"] != "FAIL" else "**FAIL**",
                                          f(r.get("seconds"), "%d"), r["reason"].replace("|", "/")) for r in s["smoke"]]
    if (s.get("table") or {}).get("parts"):
        md += ["", "| table part | this call | where |", "|---|---|---|"]
        md += ["| %s | %s | %s |" % (r["part"], r["status"], r.get("dir") or r.get("said")) for r in s["table"]["parts"]]
    if (s.get("table") or {}).get("rendered"):
        md += ["", "The accumulated table (%s, with every part before this call):" % s["table"]["accumulated"], "",
               s["table"]["rendered"].replace("# The headline table", "## The headline table", 1)]
    if s.get("tests"):
        md += ["", "| test binary | runs | rc | passed | failed | skipped | failures |", "|---|---|---|---|---|---|---|"]
        md += ["| %s | %s | %d | %d | %d | %d | %s |" % (t["test"], t.get("runs", 1), t["rc"], t["passed"], t["failed"], t["skipped"], " ".join(t["failures"])) for t in s["tests"]]
    if s.get("bisect"):
        md += ["", "| bisect-rate | CPI | answer (the first goal) | every goal | trials, s | frames / s measured by the trials |", "|---|---|---|---|---|---|"]
        for r in s["bisect"]["searches"]:
            md.append("| %s | %s | %s | %s | %s, %s | %s / %s |" % (
                r["system"], r["cpi"], r["skipped"] and ("skipped: " + r["skipped"]) or r["outcome"],
                "; ".join("%s %s (%s)" % (k, f(v["lower"]), v["ending"]) for k, v in r["goals"].items()),
                r["trials"], f(r["wall_s"], "%d"), r.get("measured_frames"), f(r.get("measured_s"), "%.1f")))
        for c in s["bisect"]["comparisons"]:
            md.append("\nratio %s / %s (%s goal): %s (bounds allow %s to %s)" % (
                c["system"], c["baseline"], c["goal"], f(c.get("ratio"), "%.3f"),
                f(c.get("ratio_low"), "%.3f"), f(c.get("ratio_high"), "%.3f")))
    if s.get("memcheck"):
        m = s["memcheck"]
        md += ["", "memcheck: %s%s" % (m.get("status"), ", rc %s, %s errors, %s tests passed" % (m.get("rc"), m.get("errors"), m.get("passed"))
                                        if m.get("status") in ("ran", "clean") else ": " + str(m.get("reason")))]
    if s.get("replay"):
        md += ["", "| placement | CPI | scene | run | CPI/s | frames measured (of --frames) / s measured | process s (outside measured frames) | host ms/frame per stage | GPU ms/frame per stage | vs all-cpu |",
               "|---|---|---|---|---|---|---|---|---|---|"]
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
            md.append("| %s | %s | %s | %s | %s | %s (of %s) / %s | %s (%s) | %s | %s | %s |" % (
                r["placement"], r["cpi"], r["scene"], "ok" if r["rc"] == 0 else "**rc %d**" % r["rc"],
                f(r.get("throughput_cpi_per_s")), f(r.get("measured_frames"), "%d"), r.get("frames"), f(r.get("measured_s"), "%.3f"),
                f(r["seconds"], "%.2f"), f(r.get("outside_measured_s"), "%.2f"),
                ", ".join("%s %s" % (k, f(v["host_ms"], "%.3f")) for k, v in r["stages"].items()),
                ", ".join("%s %s" % (k, f(v["gpu_ms"], "%.3f")) for k, v in r["stages"].items() if v["gpu_ms"] is not None),
                vs))
    for key, title in (("streams", "UDP streams"), ("share", "sharing (2048x256, all-gpu)"),
                       ("adapt", "kplace run --adapt beside the GPU hog")):
        if s.get(key):
            md += ["", "%s:" % title, "",
                   "| case | CPI | offered CPI/s | processed CPI/s | frames / partial / dropped | frames measured / s measured | post-CPI p50 / p99 ms | cores | verified | MPS clients | hog TFLOP/s |",
                   "|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in s[key]:
                if r.get("skipped"):
                    md.append("| %s | | | skipped: %s | | | | | | | |" % (r.get("placement", r.get("case")), r["skipped"]))
                    continue
                if "error" in r:
                    md.append("| %s | %s | %s | **%s** (rc %s) | | | | | | | |" % (r.get("placement", r.get("case")), r.get("cpi", "2048x256"), f(r.get("rate")), r["error"], r.get("rc")))
                    continue
                md.append("| %s | %s | %s | %s | %s / %s / %s | %s / %s | %s / %s | %s | %s | %s | %s |" % (
                    r.get("placement", r.get("case")), r.get("cpi", "2048x256"), f(r.get("rate", 150)), f(r["processed_cpi_per_s"]),
                    r["frames"], r["partial"], r["dropped"], f(r.get("measured_frames"), "%d"), f(r.get("measured_s"), "%.3f"),
                    f(r["post_cpi_p50_ms"], "%.3f"), f(r["post_cpi_p99_ms"], "%.3f"),
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
    if sys.argv[1] == "smoke":
        try:
            verdict, reason = smoke(sys.argv[2], sys.argv[3], *sys.argv[4:])
        except Exception as e:  # a judge that breaks is a failure of the path, said as such
            verdict, reason = "FAIL", "the judge failed: %s: %s" % (type(e).__name__, e)
        print("%s\t%s" % (verdict, " ".join(str(reason).split())))
        sys.exit(0)
    summary(sys.argv[2], sys.argv[3])
