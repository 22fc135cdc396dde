//! Results files of older versions, read as the current one: the plots of results measured
//! before a rename can still be drawn (the committed results under `docs/results` are of
//! versions 2 and 3).
//!
//! Version 3 differs from 4 by names only ([`from_v3`]); version 2 also by what it recorded
//! ([`from_v2`]): rates in CPI/s with CPI in their names, no goals, loads or loss ratios, and
//! every trial full-length. Nothing is invented: what version 2 did not record stays empty
//! (a trial's loss ratio, a search's goals), and the plots mark such trials by their status.

use serde_json::Value;

/// Renames `from` to `to` in `object`, if it is an object holding `from`.
fn rename(object: &mut Value, from: &str, to: &str) {
    if let Some(map) = object.as_object_mut()
        && let Some(value) = map.remove(from)
    {
        map.insert(to.to_string(), value);
    }
}

/// Every element of the array `key` of `object`.
fn each<'a>(object: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    object
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// A version-3 results file as version 4: the frame shape's `cpi` is `shape`, the deadline's
/// `cpi_duration_ms` is `frame_period_ms` and its `one_cpi_period` rule `one_frame_period`, a
/// trial's `post_cpi_*` measurements are `post_frame_*`, the sender's `sent_cpi_per_s` is
/// `sent_per_s`.
pub fn from_v3(file: &mut Value) {
    for search in each(file, "searches") {
        rename(search, "cpi", "shape");
        if let Some(budget) = search.get_mut("latency_budget") {
            rename(budget, "cpi_duration_ms", "frame_period_ms");
            if budget.get("rule").and_then(Value::as_str) == Some("one_cpi_period") {
                budget["rule"] = Value::from("one_frame_period");
            }
        }
        for trial in each(search, "trials") {
            if let Some(measurement) = trial.get_mut("measurement") {
                rename(measurement, "post_cpi_p99", "post_frame_p99");
                rename(measurement, "post_cpi_trend", "post_frame_trend");
            }
            if let Some(sender) = trial.get_mut("sender") {
                rename(sender, "sent_cpi_per_s", "sent_per_s");
            }
        }
    }
    for key in ["spreads", "comparisons"] {
        for entry in each(file, key) {
            rename(entry, "cpi", "shape");
        }
    }
}

/// A version-2 results file as version 3: rates named `*_cpi_per_s` are the unit-free
/// `real_time_rate`, `sustained_rate` and `aggregate_sustained_rate` in `CPI/s`; every trial
/// was full-length (`stage: final`), and its loss ratio was not recorded (left out).
pub fn from_v2(file: &mut Value) {
    for search in each(file, "searches") {
        rename(search, "real_time_cpi_per_s", "real_time_rate");
        rename(search, "sustained_cpi_per_s", "sustained_rate");
        rename(
            search,
            "aggregate_sustained_cpi_per_s",
            "aggregate_sustained_rate",
        );
        if let Some(map) = search.as_object_mut() {
            map.entry("unit").or_insert_with(|| Value::from("CPI/s"));
        }
        for trial in each(search, "trials") {
            if let Some(map) = trial.as_object_mut() {
                map.entry("stage").or_insert_with(|| Value::from("final"));
            }
        }
    }
}

/// Brings `file`, of schema `kplace-bisect-rate/{version}`, to the current version; `false`
/// when the version is not one this reads.
pub fn upgrade(file: &mut Value, version: &str) -> bool {
    match version {
        "2" => {
            from_v2(file);
            from_v3(file);
        }
        "3" => from_v3(file),
        _ => return false,
    }
    if let Some(map) = file.as_object_mut() {
        let schema = Value::from(crate::rate::sweep::SCHEMA);
        map.insert("schema".to_string(), schema);
    }
    true
}
