//! Rates as frame periods: the one rule every rate a user gives goes through (a frame rate
//! such as `--stream-rate`, `--rate` or `--start-rate`; a sample rate such as a recording's
//! `core:sample_rate` or `kplace record --sample-rate`, with the frame it paces).
//!
//! A run sizes its slots, paces its frames and judges their latency by the frame period, a
//! [`Duration`]: a period under [`MIN_PERIOD`] (1 ns, the clock's resolution) or over
//! [`MAX_PERIOD`] (1 day) is no stream a run can represent, so its rate is refused, as are
//! zero, negative, NaN and infinite rates, by a [`RateError`] that names where the rate came
//! from, its value and the range. Frame rates therefore lie in [`MIN_FRAME_RATE`] (a frame a
//! day) to [`MAX_FRAME_RATE`] (a frame a nanosecond) frames per second.

use std::time::Duration;

/// The shortest frame period a rate may give: 1 ns.
pub const MIN_PERIOD: Duration = Duration::from_nanos(1);
/// The longest: 1 day.
pub const MAX_PERIOD: Duration = Duration::from_secs(86_400);
/// The lowest frame rate, frames per second: one frame a day.
pub const MIN_FRAME_RATE: f64 = 1.0 / 86_400.0;
/// The highest frame rate, frames per second: one frame a nanosecond.
pub const MAX_FRAME_RATE: f64 = 1e9;

/// A rate whose frame period is outside [`MIN_PERIOD`] to [`MAX_PERIOD`], or that is no
/// positive number: what gave it (an option or a field), its value, and the range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RateError {
    /// A frame rate.
    #[error(
        "{name} {rate:?} is out of range: a frame rate must be from {} (a frame a day) to {} (a frame a nanosecond) frames per second",
        short(MIN_FRAME_RATE),
        short(MAX_FRAME_RATE)
    )]
    Frames {
        /// The option or field, e.g. `--stream-rate`.
        name: &'static str,
        /// Its value.
        rate: f64,
    },
    /// A sample rate, with the frame it paces.
    #[error(
        "{name} {rate:?} is out of range: a frame of {samples} samples per channel must last from 1 ns to 1 day, so its sample rate must be from {} to {} samples per second",
        short(*samples as f64 / MAX_PERIOD.as_secs_f64()),
        short(*samples as f64 / MIN_PERIOD.as_secs_f64())
    )]
    Samples {
        /// The option or field, e.g. `core:sample_rate`.
        name: &'static str,
        /// Its value, samples per second per channel.
        rate: f64,
        /// Samples per channel in one frame.
        samples: u64,
    },
}

/// The period of one frame at `rate` frames per second, given as `name` (an option or a
/// field, for the error).
pub fn frame_period(name: &'static str, rate: f64) -> Result<Duration, RateError> {
    period(1, rate).ok_or(RateError::Frames { name, rate })
}

/// `rate` frames per second, given as `name`, if its period is in range ([`frame_period`]).
pub fn frame_rate(name: &'static str, rate: f64) -> Result<f64, RateError> {
    frame_period(name, rate).map(|_| rate)
}

/// The period of a frame of `samples` samples per channel at `rate` samples per second per
/// channel, given as `name` (an option or a field, for the error).
pub fn sample_period(name: &'static str, rate: f64, samples: u64) -> Result<Duration, RateError> {
    period(samples, rate).ok_or(RateError::Samples {
        name,
        rate,
        samples,
    })
}

/// `samples / rate` seconds, if `rate` is a positive number and that lies from
/// [`MIN_PERIOD`] to [`MAX_PERIOD`].
fn period(samples: u64, rate: f64) -> Option<Duration> {
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let seconds = samples as f64 / rate;
    let range = MIN_PERIOD.as_secs_f64()..=MAX_PERIOD.as_secs_f64();
    if !range.contains(&seconds) {
        return None;
    }
    // In range, so a duration; clamped against rounding at the edges.
    Duration::try_from_secs_f64(seconds)
        .ok()
        .map(|d| d.clamp(MIN_PERIOD, MAX_PERIOD))
}

/// A number to four significant digits, without trailing zeros: `1.157e-5`, `1e9`, `0.5`.
fn short(x: f64) -> String {
    if (1e-3..1e6).contains(&x.abs()) {
        let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
        let text = format!("{x:.digits$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    } else {
        let text = format!("{x:.3e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if mantissa.contains('.') => format!(
                "{}e{exponent}",
                mantissa.trim_end_matches('0').trim_end_matches('.')
            ),
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_rate_in_range_is_its_period_and_its_edges_are_exact() {
        assert_eq!(frame_period("--rate", 1000.0), Ok(Duration::from_millis(1)));
        assert_eq!(frame_period("--rate", MAX_FRAME_RATE), Ok(MIN_PERIOD));
        assert_eq!(frame_period("--rate", MIN_FRAME_RATE), Ok(MAX_PERIOD));
        assert_eq!(frame_rate("--rate", 2.5), Ok(2.5));
    }

    #[test]
    fn a_frame_rate_out_of_range_is_refused_naming_the_option_the_value_and_the_range() {
        for rate in [
            1e-300,
            1e-30,
            MIN_FRAME_RATE / 1.001,
            MAX_FRAME_RATE * 1.001,
            1e30,
            0.0,
            -5.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            let e = frame_period("--stream-rate", rate).unwrap_err();
            assert!(
                matches!(e, RateError::Frames { name: "--stream-rate", rate: r } if r.to_bits() == rate.to_bits()),
                "{e:?}"
            );
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("--stream-rate {rate:?} is out of range"))
                    && text.contains(
                        "from 1.157e-5 (a frame a day) to 1e9 (a frame a nanosecond) frames per second"
                    ),
                "{text}"
            );
        }
        assert!(
            frame_period("--rate", 1e-300)
                .unwrap_err()
                .to_string()
                .starts_with("--rate 1e-300 is out of range"),
        );
    }

    #[test]
    fn a_sample_rate_paces_its_frame_and_is_refused_with_the_range_for_that_frame() {
        assert_eq!(
            sample_period("core:sample_rate", 1e6, 32),
            Ok(Duration::from_micros(32))
        );
        assert_eq!(
            sample_period("core:sample_rate", 1024e9, 1024),
            Ok(MIN_PERIOD)
        );
        for rate in [1e-300, 1e13, 0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
            let text = sample_period("core:sample_rate", rate, 1024)
                .unwrap_err()
                .to_string();
            assert!(
                text.starts_with(&format!("core:sample_rate {rate:?} is out of range"))
                    && text.contains(
                        "a frame of 1024 samples per channel must last from 1 ns to 1 day"
                    )
                    && text.contains("from 0.01185 to 1.024e12 samples per second"),
                "{text}"
            );
        }
    }

    #[test]
    fn numbers_are_said_short() {
        assert_eq!(short(1.0 / 86_400.0), "1.157e-5");
        assert_eq!(short(1e9), "1e9");
        assert_eq!(short(1024e9), "1.024e12");
        assert_eq!(short(1024.0 / 86_400.0), "0.01185");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(250.0), "250");
        assert_eq!(short(12345.0), "12345");
    }
}
