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
  gpu-check-summary.py pcie-plan REPORT TARGET_S MIN CAP_S START_S
                                                      the pcie step's next run of a placement:
                                                      RATE MEASURED WARMUP EXPECTED_S
  gpu-check-summary.py tile REFERENCE PERIOD FRAMES OUT
                                                      REFERENCE's first PERIOD frames of
                                                      detections repeated to FRAMES frames
"""

import glob, json, math, os, re, statistics, sys

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

# ---------------------------------------------------------------------------------------------
# The pcie step (issue 50, item 5): each GPU placement's closed-loop rate on the path with
# graphs against the PCIe bound (the pinned host-to-device copy rate at the frame's size,
# measured in the same step), the host's, the GPU's and the source's time per frame, the CuPy
# peer, and the goals, each met or missed with its ratio. A row whose run failed, whose
# verification failed or whose detections differ from all-cpu's is a failure, not a number.

PCIE_SIZES = ["1024x128", "4096x512"]
PCIE_PLACEMENTS = ["all-gpu", "hybrid", "gpu-fft", "cfar-gpu"]
# The all-gpu closed loop's goals as shares of the PCIe bound, the least it must be against the
# CuPy peer, and the most its post-frame p99 may be, streamed at 1024x128 and 400 CPI/s.
PCIE_BOUND_GOALS = [("4096x512", 0.7), ("1024x128", 0.3)]
PCIE_CUPY_GOAL = 5.0
PCIE_P99_GOAL_MS = 0.3
# What a row must measure after its warm-up (fewer is said in the notes).
PCIE_MIN_SECONDS, PCIE_MIN_FRAMES = 1.0, 200

def frame_bytes(cpi):
    """The bytes of a frame's samples: the radar's iq tensor, ci16 (4 bytes a sample)."""
    samples, chirps = cpi.split("x")
    return int(samples) * int(chirps) * 4

def pcie_plan(report, target_s, minimum, cap_s, start_s):
    """The next run of a placement, from its last run's report: `RATE MEASURED WARMUP
    EXPECTED_S`, measuring TARGET_S seconds and at least MINIMUM frames, at most CAP_S seconds
    of frames, after a warm-up of 0.1 s and at least 16 frames; EXPECTED_S adds START_S for
    the process's start-up."""
    rep = load(report)
    rate = rep.get("frames_per_s") if isinstance(rep, dict) else None
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
        print("%s: no frames_per_s to plan by" % report, file=sys.stderr)
        return 1
    measured = min(max(int(minimum), math.ceil(float(target_s) * rate)), max(1, int(float(cap_s) * rate)))
    warmup = max(16, math.ceil(0.1 * rate))
    expected = int(start_s) + math.ceil((measured + warmup) / rate)
    print("%.1f %d %d %d" % (rate, measured, warmup, expected))
    return 0

def tile(reference, period, frames, out):
    """Writes OUT: the detections of frames 0..FRAMES, frame i being REFERENCE's frame i mod
    PERIOD (a replay with --scene-frames PERIOD shows scene frame i mod PERIOD as frame i)."""
    period, frames = int(period), int(frames)
    header, found, current, left = None, {}, None, 0
    with open(reference) as f:
        for n, line in enumerate(f, 1):
            t = line.strip()
            if not t or t.startswith("#"):
                continue
            if header is None:
                header = t
                continue
            parts = t.split()
            if parts[0] == "frame":
                if left:
                    raise SystemExit("%s:%d: a frame line where %d cluster line(s) were due" % (reference, n, left))
                fid, left = int(parts[1]), int(parts[2])
                current = found.setdefault(fid, []) if fid < period else None
            elif left:
                left -= 1
                if current is not None:
                    current.append(t)
            else:
                raise SystemExit("%s:%d: a cluster line outside any frame" % (reference, n))
    missing = [i for i in range(period) if i not in found]
    if header is None or missing or left:
        raise SystemExit("%s: no header, frames missing (%s) or a frame cut short" % (reference, missing[:8]))
    with open(out, "w") as o:
        o.write(header + "\n")
        for i in range(frames):
            clusters = found[i % period]
            o.write("frame %d %d\n" % (i, len(clusters)))
            for c in clusters:
                o.write(c + "\n")
    return 0

def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)

def pcie_figures(rep, device):
    """A replay's figures: the measured frames and seconds, the rate, the host's CPU time per
    frame (every thread: the report's cores_used over its rate), the workers' time in kernels
    or GPU enqueues, the source's time per frame and its staging once, the GPU's time per frame
    (the stages' timing events, --profile-gpu only)."""
    out = measured(rep, device)
    rep = rep if isinstance(rep, dict) else {}
    rate, cores, over = rep.get("frames_per_s"), rep.get("cores_used"), rep.get("overhead") or {}
    gpu = {st["name"]: st["gpu_ms_per_frame"] for st in rep.get("stages", []) if number(st.get("gpu_ms_per_frame"))}
    out.update(
        cpi_per_s=rate if number(rate) else None,
        host_us_per_frame=cores * 1e6 / rate if number(cores) and number(rate) and rate > 0 else None,
        launch_us_per_frame=over["kernel_ms_per_frame"] * 1e3 if number(over.get("kernel_ms_per_frame")) else None,
        source_us_per_frame=over.get("source_us_per_frame"),
        source_staging_ms=over.get("source_staging_ms"),
        gpu_ms_per_frame=sum(gpu.values()) if gpu else None,
        gpu_ms_per_stage=gpu or None,
    )
    return out

def middle(values):
    values = sorted(v for v in values if number(v))
    return statistics.median(values) if values else None

def pcie_run(scratch, r, device):
    """Judges one replay run of the step in place: `failure` says why it is not a number."""
    rep = load(os.path.join(scratch, r["base"] + ".json"))
    r.update(pcie_figures(rep, device))
    r["report"] = r["base"] + ".json" if rep is not None else None
    why = []
    if r["rc"] != 0:
        why.append("rc %s" % r["rc"])
    if rep is None:
        why.append("no report (%s.log: %s)" % (r["base"], said_last(scratch, r["base"] + ".log")))
    elif not (rep.get("verification") or {}).get("passed"):
        why.append("verification failed: %s" % ("; ".join((rep.get("verification") or {}).get("reasons", [])[:2]) or "no reason given"))
    if r["kind"] != "reference" and r["rc"] == 0:
        cmp = load(os.path.join(scratch, r["base"] + ".compare.json"))
        if cmp is None:
            why.append("not compared with all-cpu (compare rc %s: %s)" % (
                r.get("compare_rc"), said_last(scratch, r["base"] + ".compare.err")))
        else:
            # The rule as the step asked for it ("rel 1e-5" or "exact"); the comparison's own
            # words for it are its `rule` and `rel_tol`.
            r["comparison"] = {k: cmp.get(k) for k in ("agree", "rel_tol", "frames_compared", "cells_matched",
                                                      "powers_identical", "max_relative", "differences")}
            r["comparison"].update(rule=r.get("rule"), listed=(cmp.get("listed") or [])[:20])
            if not cmp.get("agree"):
                why.append("%s differences from all-cpu's detections (%s)" % (cmp.get("differences"), r.get("rule")))
    r["failure"] = "; ".join(why) or None
    r["short"] = r["kind"] == "row" and not r["failure"] and not (
        (r.get("measured_s") or 0) >= PCIE_MIN_SECONDS and (r.get("measured_frames") or 0) >= PCIE_MIN_FRAMES)

def pcie_summary(scratch, device, problems, notes):
    rows = lines(os.path.join(scratch, "results", "pcie.jsonl"))
    if not rows:
        return None
    copies = lines(os.path.join(scratch, "results", "pcie-copies.jsonl"))
    h2d = {c["bytes"]: c for c in copies if c.get("direction") == "h2d"}
    bounds = {}
    for cpi in PCIE_SIZES:
        c = h2d.get(frame_bytes(cpi)) or {}
        gbps = c.get("gb_per_s")
        bounds[cpi] = {"frame_bytes": frame_bytes(cpi), "h2d_gb_per_s": gbps,
                       "fraction_of_nominal": c.get("fraction_of_nominal"),
                       "cpi_per_s": gbps * 1e9 / frame_bytes(cpi) if number(gbps) else None}
    runs, cupy, stream = [], {}, None
    what = lambda r: "pcie %s %s %s%s" % (r.get("placement"), r.get("cpi"), r.get("kind"),
                                          " %s" % r["round"] if r.get("kind") in ("row", "probe") else "")
    for r in rows:
        kind = r.get("kind")
        if kind == "copies":
            if r.get("rc") != 0:
                problems.append("pcie: the copy rates: rc %s (logs/pcie-copies.txt)" % r.get("rc"))
            continue
        if kind == "cupy":
            if r.get("skipped"):
                notes.append("pcie: the CuPy peer skipped: " + r["skipped"])
                continue
            d = os.path.join(scratch, r["dir"])
            peer, ours, cmp = (load(os.path.join(d, name)) for name in ("result.json", "kplace.json", "compare.json"))
            r["cupy_cpi_per_s"] = (peer or {}).get("throughput_cpi_per_s")
            r["cupy_measured_frames"], r["cupy_measured_s"] = (peer or {}).get("measured_frames"), (peer or {}).get("seconds")
            r["kplace_all_gpu_cpi_per_s"] = (ours or {}).get("frames_per_s")
            r["agree"] = cmp.get("agree") if cmp else None
            r["said"] = (text(os.path.join(scratch, "logs", "pcie-cupy-%s.txt" % r["cpi"])) or "").splitlines()[-3:]
            if r["rc"] != 0 or not r["agree"] or not number(r["cupy_cpi_per_s"]):
                problems.append("pcie: the CuPy peer at %s: rc %s, detections %s (logs/pcie-cupy-%s.txt)" % (
                    r["cpi"], r["rc"], {True: "agree", False: "differ", None: "not compared"}[r["agree"]], r["cpi"]))
                r["cupy_cpi_per_s"] = None
            elif (r["cupy_measured_s"] or 0) < PCIE_MIN_SECONDS:
                notes.append("pcie: the CuPy peer at %s measured %.3f s, under %.0f s" % (r["cpi"], r["cupy_measured_s"] or 0, PCIE_MIN_SECONDS))
            cupy[r["cpi"]] = r
            continue
        if kind == "stream":
            rep = load(os.path.join(scratch, r["base"] + ".json")) or {}
            post = (rep.get("latency") or {}).get("post_frame") or {}
            r.update(measured(rep or None, device))
            r.update(processed_cpi_per_s=rep.get("frames_per_s"), frames_done=rep.get("frames"),
                     partial=rep.get("partial_frames"), dropped=rep.get("dropped_frames"),
                     verified=(rep.get("verification") or {}).get("passed"),
                     post_frame_p50_ms=post.get("p50_ms"), post_frame_p99_ms=post.get("p99_ms"))
            lost = (r["partial"] or 0) + (r["dropped"] or 0)
            if r["rc"] != 0 or not r["verified"] or lost:
                problems.append("pcie: all-gpu streamed at %s CPI/s: rc %s, verified %s, %d frames lost (%s.log)" % (
                    r["rate"], r["rc"], r["verified"], lost, r["base"]))
                r["post_frame_p99_ms"] = None
            stream = r
            continue
        if r.get("skipped"):
            notes.append("%s: skipped: %s" % (what(r), r["skipped"]))
            runs.append(r)
            continue
        pcie_run(scratch, r, device)
        if r["failure"]:
            problems.append("%s: %s" % (what(r), r["failure"]))
        elif r["short"]:
            notes.append("%s: measured %s frames in %.3f s, under %d frames or %.0f s" % (
                what(r), r.get("measured_frames"), r.get("measured_s") or 0, PCIE_MIN_FRAMES, PCIE_MIN_SECONDS))
        runs.append(r)
    cells = []
    for cpi in PCIE_SIZES:
        bound = bounds[cpi]["cpi_per_s"]
        peer = (cupy.get(cpi) or {}).get("cupy_cpi_per_s")
        for p in PCIE_PLACEMENTS:
            mine = [r for r in runs if r.get("placement") == p and r.get("cpi") == cpi]
            ok = [r for r in mine if r.get("kind") == "row" and not r.get("skipped") and not r.get("failure")]
            rates = sorted(r["cpi_per_s"] for r in ok if number(r.get("cpi_per_s")))
            med = middle(rates)
            prof = next((r for r in mine if r.get("kind") == "profiled" and not r.get("skipped") and not r.get("failure")), None)
            cells.append({
                "placement": p, "cpi": cpi, "rows": len(ok),
                "rows_failed": sum(1 for r in mine if r.get("kind") == "row" and r.get("failure")),
                "rows_skipped": sum(1 for r in mine if r.get("kind") == "row" and r.get("skipped")),
                "rows_short": sum(1 for r in ok if r.get("short")),
                "rates": rates, "median_cpi_per_s": med,
                "min_cpi_per_s": rates[0] if rates else None, "max_cpi_per_s": rates[-1] if rates else None,
                "spread": (rates[-1] - rates[0]) / med if rates and med else None,
                "measured_frames": [r.get("measured_frames") for r in ok], "measured_s": [r.get("measured_s") for r in ok],
                "bound_cpi_per_s": bound, "of_bound": med / bound if med and bound else None,
                "host_us_per_frame": middle(r.get("host_us_per_frame") for r in ok),
                "launch_us_per_frame": middle(r.get("launch_us_per_frame") for r in ok),
                "source_us_per_frame": middle(r.get("source_us_per_frame") for r in ok),
                "source_staging_ms": middle(r.get("source_staging_ms") for r in ok),
                "gpu_ms_per_frame": prof.get("gpu_ms_per_frame") if prof else None,
                "gpu_ms_per_stage": prof.get("gpu_ms_per_stage") if prof else None,
                "profiled_cpi_per_s": prof.get("cpi_per_s") if prof else None,
                "cupy_cpi_per_s": peer, "vs_cupy": med / peer if med and peer else None,
            })
            if len(ok) < 3:
                notes.append("pcie %s %s: %d of 3 rows counted" % (p, cpi, len(ok)))
    cell = {(c["placement"], c["cpi"]): c for c in cells}
    goals = []
    def goal(name, value, ratio, target, at_least, unmeasured):
        status = "not measured" if ratio is None else \
            ("met" if (ratio >= target if at_least else ratio <= target) else "missed")
        goals.append({"goal": name, "measured": value, "ratio": ratio, "target": target, "status": status,
                      "why": unmeasured if ratio is None else None})
        if status != "met":
            notes.append("pcie goal %s: %s" % (status, name) + (" (%s)" % unmeasured if ratio is None else
                                                               ": ratio %.3f" % ratio))
    for cpi, share in PCIE_BOUND_GOALS:
        c = cell[("all-gpu", cpi)]
        goal("all-gpu closed loop at %s: at least %.1f of the PCIe bound%s" % (
                 cpi, share, " (%.0f CPI/s)" % (share * c["bound_cpi_per_s"]) if c["bound_cpi_per_s"] else ""),
             "%s of %s CPI/s" % (f(c["median_cpi_per_s"], "%.0f"), f(c["bound_cpi_per_s"], "%.0f")),
             c["of_bound"], share, True, "no copy rate" if not c["bound_cpi_per_s"] else "no row counted")
    for cpi in PCIE_SIZES:
        c = cell[("all-gpu", cpi)]
        goal("all-gpu closed loop at %s: at least %.0fx the CuPy peer" % (cpi, PCIE_CUPY_GOAL),
             "%s against %s CPI/s" % (f(c["median_cpi_per_s"], "%.0f"), f(c["cupy_cpi_per_s"], "%.0f")),
             c["vs_cupy"], PCIE_CUPY_GOAL, True, "no CuPy rate" if not c["cupy_cpi_per_s"] else "no row counted")
    p99 = (stream or {}).get("post_frame_p99_ms")
    goal("post-frame p99 of all-gpu at 1024x128 streamed at 400 CPI/s: at most %.1f ms" % PCIE_P99_GOAL_MS,
         "%s ms" % f(p99, "%.3f"), p99 / PCIE_P99_GOAL_MS if number(p99) else None, 1.0, False,
         "no stream measured" if stream is None else "the stream failed")
    return {"bounds": bounds, "copies": copies, "cells": cells, "goals": goals, "stream": stream,
            "cupy": list(cupy.values()), "runs": runs}

def pcie_table(pc):
    """The step's tables for table.md."""
    md = ["", "## pcie: the GPU path with graphs against the PCIe bound (issue 50)", "",
          "The bound is the pinned host-to-device copy rate at the frame's size over the frame's bytes, measured "
          "in the same step: %s." % "; ".join(
              "%s (%d B) %s GB/s, %s CPI/s" % (cpi, b["frame_bytes"], f(b["h2d_gb_per_s"], "%.2f"), f(b["cpi_per_s"], "%.0f"))
              for cpi, b in pc["bounds"].items()),
          "Rates are the median of the rows counted (closed loop, no --profile-gpu), with their range; host CPU is every "
          "thread's CPU time per frame (cores used over the rate); enqueue is the workers' time in kernels or GPU enqueues; "
          "GPU ms is the --profile-gpu row's (the path without graphs).", "",
          "| placement | CPI | CPI/s median (min-max), rows | of the PCIe bound | host CPU us/frame | enqueue us/frame | source us/frame (staging ms, once) | GPU ms/frame | CuPy CPI/s | kplace / CuPy |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for c in pc["cells"]:
        rows = "%d of 3%s" % (c["rows"], "".join(", %d %s" % (c[k], w) for k, w in (
            ("rows_failed", "**failed**"), ("rows_skipped", "skipped"), ("rows_short", "short")) if c[k]))
        md.append("| %s | %s | %s (%s-%s), %s | %s | %s | %s | %s (%s) | %s | %s | %s |" % (
            c["placement"], c["cpi"], f(c["median_cpi_per_s"], "%.0f"), f(c["min_cpi_per_s"], "%.0f"),
            f(c["max_cpi_per_s"], "%.0f"), rows, f(c["of_bound"], "%.3f"), f(c["host_us_per_frame"], "%.1f"),
            f(c["launch_us_per_frame"], "%.1f"), f(c["source_us_per_frame"], "%.1f"), f(c["source_staging_ms"], "%.1f"),
            f(c["gpu_ms_per_frame"], "%.3f"), f(c["cupy_cpi_per_s"], "%.0f"), f(c["vs_cupy"], "%.1f")))
    md += ["", "| goal (issue 50) | measured | ratio | |", "|---|---|---|---|"]
    md += ["| %s | %s | %s | %s |" % (g["goal"], g["measured"], f(g["ratio"], "%.3f"),
                                      "**%s**" % g["status"] + (": %s" % g["why"] if g["why"] else ""))
           for g in pc["goals"]]
    md += ["", "| run | placement | CPI | frames (warm-up) | measured frames / s | CPI/s | GPU ms | vs all-cpu |",
           "|---|---|---|---|---|---|---|---|"]
    for r in pc["runs"]:
        name = r["kind"] + (" %s" % r["round"] if r["kind"] in ("row", "probe") else "")
        if r.get("skipped"):
            md.append("| %s | %s | %s | skipped: %s | | | | |" % (name, r["placement"], r["cpi"], r["skipped"]))
            continue
        c = r.get("comparison")
        vs = "(reference)" if r["kind"] == "reference" else ("agree (%s, max rel %s)" % (c["rule"], f(c["max_relative"], "%.1e"))
                                                              if c and c["agree"] else "")
        md.append("| %s | %s | %s | %s (%s) | %s / %s | %s | %s | %s |" % (
            name, r["placement"], r["cpi"], r.get("frames"), r.get("warmup"), f(r.get("measured_frames"), "%d"),
            f(r.get("measured_s"), "%.3f"), f(r.get("cpi_per_s"), "%.0f"), f(r.get("gpu_ms_per_frame"), "%.3f"),
            ("**FAILED**: " + r["failure"].replace("|", "/")) if r.get("failure") else vs))
    st = pc.get("stream")
    if st:
        md += ["", "all-gpu streamed at 1024x128, %s CPI/s offered: %s processed, post-frame p50 / p99 %s / %s ms, %s frames, %s partial, %s dropped, verified %s (rc %s)" % (
            st.get("rate"), f(st.get("processed_cpi_per_s")), f(st.get("post_frame_p50_ms"), "%.3f"), f(st.get("post_frame_p99_ms"), "%.3f"),
            st.get("frames_done"), st.get("partial"), st.get("dropped"), st.get("verified"), st.get("rc"))]
    for c in pc["cupy"]:
        md += ["", "CuPy peer at %s: %s CPI/s over %s frames in %s s, kplace all-gpu %s CPI/s on the same frames, detections %s (rc %s)" % (
            c["cpi"], f(c.get("cupy_cpi_per_s")), c.get("cupy_measured_frames"), f(c.get("cupy_measured_s"), "%.3f"),
            f(c.get("kplace_all_gpu_cpi_per_s")), {True: "agree", False: "**differ**", None: "not compared"}[c.get("agree")], c.get("rc"))]
    return md

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
    s["pcie"] = pcie_summary(scratch, device, problems, notes)
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
    # A step that ran but skipped part of its work for want of time.
    cut = ["pcie skipped %d of its runs" % n for n in
           [sum(1 for r in (s.get("pcie") or {}).get("runs", []) if r.get("skipped"))] if n]
    if pre is not None and not pre.get("usable"):
        s["status"], s["reason"] = "stopped", "the GPU path cannot run here: " + "; ".join(pre["missing"])
    elif pre is None and "preflight" in steps:
        row = steps["preflight"]
        why = ("skipped: " + row["skipped"]) if row.get("skipped") else "rc %s" % row["rc"]
        s["status"], s["reason"] = "stopped", "the preflight ended (%s) before judging the machine" % why
    elif problems:
        s["status"], s["reason"] = "failed", "; ".join(problems)
    elif missing_steps or skipped or cut:
        s["status"] = "incomplete"
        s["reason"] = "no problem in %d step(s) run (%s); %s" % (len(ran), ", ".join(ran), "; ".join(
            (["not reached: " + ", ".join(missing_steps)] if missing_steps else [])
            + (["skipped: " + ", ".join(skipped)] if skipped else []) + cut))
    else:
        s["status"], s["reason"] = "passed", "every step passed"
    s["problems"] = problems
    s["notes"] = notes
    write(out, "summary.json", json.dumps(s, indent=1))
    write(out, "table.md", table(s))

SUITES = {
    "check": ["preflight", "smoke", "pcie", "tests", "replay", "streams", "copies", "tune", "share", "adapt", "admit", "cupy",
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
    if s.get("pcie"):
        md += pcie_table(s["pcie"])
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
    if sys.argv[1] == "pcie-plan":
        sys.exit(pcie_plan(*sys.argv[2:7]))
    if sys.argv[1] == "tile":
        sys.exit(tile(*sys.argv[2:6]))
    if sys.argv[1] == "smoke":
        try:
            verdict, reason = smoke(sys.argv[2], sys.argv[3], *sys.argv[4:])
        except Exception as e:  # a judge that breaks is a failure of the path, said as such
            verdict, reason = "FAIL", "the judge failed: %s: %s" % (type(e).__name__, e)
        print("%s\t%s" % (verdict, " ".join(str(reason).split())))
        sys.exit(0)
    summary(sys.argv[2], sys.argv[3])
