//! The exit statuses of `kplace bisect-rate`, and which one a sweep ends with. Besides these,
//! 2 is an error that stopped the sweep (a bad option or file). When several apply, the first
//! in this order wins: interrupted, below the required rate, no rate, some skipped. A search
//! that answers with the sender's limit ("at least R") counts as measured: R is a number.

use crate::rate::sweep::SearchEntry;

/// Every search measured a sustained rate (and met the required rate).
pub const MEASURED: u8 = 0;
/// Some systems were skipped (they cannot run here); every search that ran measured a rate.
pub const SOME_SKIPPED: u8 = 3;
/// A search's first goal has no answer (even the lowest rate fails it, or the trial cap came
/// before any rate met it), or nothing was searched.
pub const NO_RATE: u8 = 1;
/// A search measured a rate below the required rate.
pub const BELOW_REQUIRED: u8 = 5;
/// Interrupted (Ctrl-C); what was found so far is written.
pub const INTERRUPTED: u8 = 130;

/// The exit status of a sweep whose searches are `searches` and, when it is not 0, why.
pub fn status(
    searches: &[SearchEntry],
    interrupted: bool,
    require_rate: Option<f64>,
) -> (u8, Option<String>) {
    if interrupted {
        return (INTERRUPTED, Some("interrupted".into()));
    }
    let ran: Vec<&SearchEntry> = searches.iter().filter(|s| s.skipped.is_none()).collect();
    let skipped = searches.len() - ran.len();
    let describe = |s: &SearchEntry| format!("{} at {} (repeat {})", s.system, s.shape, s.repeat);
    if let Some(required) = require_rate {
        let below: Vec<String> = ran
            .iter()
            .filter_map(|s| {
                let rate = s.sustained_rate?;
                (rate < required).then(|| format!("{} sustained {rate:.1} {}", describe(s), s.unit))
            })
            .collect();
        if !below.is_empty() {
            return (
                BELOW_REQUIRED,
                Some(format!(
                    "below the required {required} {}: {}",
                    ran.first().map_or("frames/s", |s| s.unit.as_str()),
                    below.join("; ")
                )),
            );
        }
    }
    let no_rate: Vec<String> = ran
        .iter()
        .filter(|s| s.sustained_rate.is_none())
        .map(|s| format!("{}: {}", describe(s), s.outcome))
        .collect();
    if ran.is_empty() {
        let why = match skipped {
            0 => "nothing was searched".to_string(),
            n => format!(
                "no rate found: every system was skipped ({n} skipped, reasons above); nothing was searched"
            ),
        };
        return (NO_RATE, Some(why));
    }
    if !no_rate.is_empty() {
        return (
            NO_RATE,
            Some(format!(
                "no rate found by {} of {} searches: {}",
                no_rate.len(),
                ran.len(),
                no_rate.join("; ")
            )),
        );
    }
    if skipped > 0 {
        return (
            SOME_SKIPPED,
            Some(format!("{skipped} systems were skipped (reasons above)")),
        );
    }
    (MEASURED, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A search entry as the results file has it, with `outcome_kind` and a rate or none.
    fn entry(kind: &str, sustained: Option<f64>, skipped: bool) -> SearchEntry {
        let mut e: SearchEntry = serde_json::from_value(json!({
            "system": "all-cpu", "shape": "1024x128", "repeat": 0,
            "unit": "frames/s", "real_time_rate": 156.25,
            "latency_budget": {"rule": "deadline", "frame_period_ms": 6.4},
        }))
        .expect("the minimal entry parses");
        e.outcome_kind = kind.into();
        e.outcome = kind.replace('_', " ");
        e.sustained_rate = sustained;
        e.skipped = skipped.then(|| "needs a GPU".to_string());
        e
    }

    #[test]
    fn exit_statuses_say_what_the_sweep_found_most_urgent_first() {
        let measured = entry("regular", Some(500.0), false);
        let sender_limited = entry("sender_limit", Some(450.0), false);
        let skipped = entry("skipped", None, true);
        let no_rate = entry("min_load", None, false);
        let code = |s: &[SearchEntry], required| status(s, false, required).0;

        assert_eq!(
            status(std::slice::from_ref(&measured), false, None),
            (0, None)
        );
        // "At least R, the sender's limit" is a number.
        assert_eq!(code(&[measured.clone(), sender_limited], None), MEASURED);
        assert_eq!(
            code(&[measured.clone(), skipped.clone()], None),
            SOME_SKIPPED
        );
        assert_eq!(code(std::slice::from_ref(&skipped), None), NO_RATE);
        assert_eq!(code(&[], None), NO_RATE);
        assert_eq!(code(&[measured.clone(), no_rate.clone()], None), NO_RATE);
        assert_eq!(code(&[no_rate.clone(), skipped.clone()], None), NO_RATE);
        // A required rate: a measured rate below it wins over everything but Ctrl-C.
        assert_eq!(code(std::slice::from_ref(&measured), Some(400.0)), MEASURED);
        assert_eq!(code(std::slice::from_ref(&measured), Some(500.0)), MEASURED);
        let (c, why) = status(&[measured.clone(), no_rate.clone()], false, Some(600.0));
        assert_eq!(c, BELOW_REQUIRED);
        assert_eq!(
            why.unwrap(),
            "below the required 600 frames/s: all-cpu at 1024x128 (repeat 0) sustained 500.0 frames/s"
        );
        assert_eq!(status(&[measured], true, Some(600.0)).0, INTERRUPTED);
        let (_, why) = status(&[no_rate], false, None);
        assert!(
            why.unwrap()
                .contains("all-cpu at 1024x128 (repeat 0): min load"),
        );
        let codes = [MEASURED, NO_RATE, SOME_SKIPPED, BELOW_REQUIRED, INTERRUPTED];
        let mut distinct = codes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), codes.len(), "every status is its own");
        assert!(!codes.contains(&2), "2 is kplace's error status");
        assert!(
            !codes.contains(&4),
            "4 was \"unsteady machine\", which no search ends with"
        );
    }
}
