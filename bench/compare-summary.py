#!/usr/bin/env python3
"""The peers' table from bench/compare.sh's searches (kplace-bisect-rate JSON).

    compare-summary.py OUT "CPI CPI..." SYSTEM...        the table (markdown) on stdout,
                                                         compare.json in OUT
    compare-summary.py --common-rate OUT CPI SYSTEM...   80% of the lowest median sustained
                                                         rate at CPI (empty if none)

Per system and CPI, over its repeated searches (a search that found no rate, e.g. one
stopped at its trial cap, is counted but has no figures): the sustained rate (the first
goal's answer), and at each search's sustained rate (its last full-length trial there) the
post-CPI p50 and p99.9 latency and the cores used; each as the median with [min, max]. Ratios to kplace are of medians, with the widest
interval the spreads allow: [min / kplace's max, max / kplace's min].
"""

import json
import statistics
import sys


def searches(out, system, cpi):
    """The searches of OUT/SYSTEM-CPI/bisect-rate.json, or [] when it is missing or damaged."""
    try:
        with open(f"{out}/{system}-{cpi}/bisect-rate.json", encoding="utf-8") as f:
            return json.load(f)["searches"]
    except (OSError, KeyError, ValueError):
        return []


def at_sustained(search):
    """The last full-length measured trial at the search's sustained rate, or None."""
    rate = search.get("sustained_rate")
    full = [
        t
        for t in search.get("trials", [])
        if t.get("stage") == "final" and t.get("loss_ratio") is not None and t.get("rate") == rate
    ]
    return full[-1] if full else None


def spread(values):
    """(median, min, max) of the values that are numbers, or None when there are none."""
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def measure(out, system, cpi):
    """A system's figures at one CPI over its searches."""
    found = searches(out, system, cpi)
    trials = [at_sustained(s) for s in found]
    return {
        "system": system,
        "cpi": cpi,
        "searches": len(found),
        "outcomes": [s.get("outcome") for s in found],
        "sustained_rate": [s.get("sustained_rate") for s in found],
        "p50_ms": [((t or {}).get("latency") or {}).get("p50_ms") for t in trials],
        "p999_ms": [((t or {}).get("latency") or {}).get("p999_ms") for t in trials],
        "cores_used": [(t or {}).get("cores_used") for t in trials],
    }


def common_rate(out, cpi, systems):
    """80% of the lowest median sustained rate among the systems at CPI."""
    medians = [spread(measure(out, s, cpi)["sustained_rate"]) for s in systems]
    medians = [m[0] for m in medians if m and m[0]]
    return f"{0.8 * min(medians):.1f}" if medians else ""


def equal_load(out, system, cpi):
    """The one trial at the common rate: (rate, status, p50, p99.9, cores used)."""
    found = searches(out, f"{system}-at", cpi)
    trial = ((found[0] if found else {}).get("trials") or [{}])[0]
    latency = trial.get("latency") or {}
    return (
        trial.get("rate"),
        trial.get("status"),
        latency.get("p50_ms"),
        latency.get("p999_ms"),
        trial.get("cores_used"),
    )


def text(value, fmt="%.1f"):
    """A number as text, n/a for anything else."""
    return fmt % value if isinstance(value, (int, float)) else "n/a"


def ranged(values, fmt="%.1f"):
    """median [min, max] of a list, as text."""
    s = spread(values)
    if s is None:
        return "n/a"
    return f"{fmt % s[0]} [{fmt % s[1]}, {fmt % s[2]}]"


def ratio(values, base):
    """The ratio of medians with its widest interval, as text."""
    a, b = spread(values), spread(base)
    if not a or not b or not b[0] or not b[1] or not b[2]:
        return "n/a"
    return f"{a[0] / b[0]:.2f} [{a[1] / b[2]:.2f}, {a[2] / b[1]:.2f}]"


def table(out, cpis, systems):
    """The markdown tables, and compare.json beside them."""
    rows = [measure(out, system, cpi) for cpi in cpis for system in systems]
    lines = [
        "| system | CPI | searches measured | sustained CPI/s | rate / kplace | post-CPI p50 ms | p50 / kplace "
        "| post-CPI p99.9 ms | p99.9 / kplace | cores used | cores / kplace |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    bases = {r["cpi"]: r for r in rows if r["system"] == "kplace"}
    for row in rows:
        base = bases.get(row["cpi"])
        measured = sum(isinstance(r, (int, float)) for r in row["sustained_rate"])
        cells = [row["system"], row["cpi"], f"{measured} of {row['searches']}"]
        for key, fmt in (
            ("sustained_rate", "%.1f"),
            ("p50_ms", "%.2f"),
            ("p999_ms", "%.2f"),
            ("cores_used", "%.2f"),
        ):
            cells.append(ranged(row[key], fmt))
            cells.append(ratio(row[key], base[key]) if base else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "At equal load (one trial each at 80% of the lowest median sustained rate):",
        "",
        "| system | CPI | rate CPI/s | trial | post-CPI p50 ms | post-CPI p99.9 ms | cores used |",
        "|---|---|---|---|---|---|---|",
    ]
    for cpi in cpis:
        for system in systems:
            rate, status, p50, p999, cores = equal_load(out, system, cpi)
            row = next(r for r in rows if r["system"] == system and r["cpi"] == cpi)
            row["at_common_rate"] = {
                "rate": rate,
                "status": status,
                "p50_ms": p50,
                "p999_ms": p999,
                "cores_used": cores,
            }
            lines.append(
                f"| {system} | {cpi} | {text(rate)} | {status or 'n/a'} | {text(p50, '%.2f')} "
                f"| {text(p999, '%.2f')} | {text(cores, '%.2f')} |"
            )
    with open(f"{out}/compare.json", "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    return "\n".join(lines)


def main(argv):
    """Dispatches on the first argument (see the module doc)."""
    if argv and argv[0] == "--common-rate":
        out, cpi, *systems = argv[1:]
        print(common_rate(out, cpi, systems))
        return 0
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, cpis, *systems = argv
    print(table(out, cpis.split(), systems))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
