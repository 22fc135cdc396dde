//! The one syntax of every duration option: a number with a unit, `250ms`, `2s`, `1m 30s`
//! (humantime's). Options that once took a bare number in a unit of their own name
//! (`--frame-timeout-ms 20`, `--idle-timeout-s 2`) keep that spelling as a hidden alias for
//! one release: a bare number is read in the old option's unit.

use std::time::Duration;

/// A duration option's value: `TEXT` with a unit, or a bare number in `unit` (the old
/// spelling's), at least zero.
fn parse(text: &str, unit: Duration) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(number) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(unit.as_secs_f64() * number)
            .map_err(|_| format!("{text} is not a duration (e.g. 250ms, 2s)"));
    }
    humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 250ms, 2s, 1m)"))
}

/// A duration whose bare numbers are milliseconds.
pub fn or_ms(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_millis(1))
}

/// A duration whose bare numbers are seconds.
pub fn or_s(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_secs(1))
}

/// A duration whose bare numbers are microseconds.
pub fn or_us(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_micros(1))
}

/// A duration whose bare numbers are hours.
pub fn or_h(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_secs(3600))
}

/// A duration longer than zero, with a unit (`--report-every`, `--latency-budget`).
pub fn positive(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 1s, 250ms)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_is_read_and_a_bare_number_is_the_old_options_unit() {
        assert_eq!(or_ms("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(or_ms("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(or_ms("20"), Ok(Duration::from_millis(20)));
        assert_eq!(or_s("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(or_s("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(or_us("7.5"), Ok(Duration::from_nanos(7500)));
        assert_eq!(or_h("2"), Ok(Duration::from_secs(7200)));
        for bad in ["-1", "inf", "NaN", "fast", "2 parsecs"] {
            assert!(or_s(bad).is_err(), "{bad}");
        }
        assert!(positive("0s").unwrap_err().contains("longer than zero"));
        assert!(positive("5").is_err(), "a new option takes a unit");
    }
}
