//! The parameters of the two FFT stages, `radar.range_fft` and `radar.doppler_fft`.
//!
//! Both take one parameter, `planner` (`estimate`, `measure` or `patient`; default
//! `estimate`), and every backend validates it the same way so that one graph file serves
//! them all: the CPU library maps it to FFTW's planning rigor; a backend with nothing to
//! choose (cuFFT) validates it and ignores it. The transforms themselves (Hann window over
//! the transformed axis, [`crate::window`]; forward, unnormalised, no shift) are the
//! backends' work.

use crate::ParamError;

/// The FFT stages' one parameter.
pub const PLANNER_PARAM: &str = "planner";

/// The parameters `radar.range_fft` accepts.
pub const RANGE_FFT_PARAMS: &[&str] = &[PLANNER_PARAM];

/// The parameters `radar.doppler_fft` accepts.
pub const DOPPLER_FFT_PARAMS: &[&str] = &[PLANNER_PARAM];

/// The `planner` parameter: how hard a backend may search for a fast plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Planner {
    /// `estimate`, the default: a heuristic plan, the same every time (deterministic).
    #[default]
    Estimate,
    /// `measure`: time candidate plans.
    Measure,
    /// `patient`: time many more candidates.
    Patient,
}

impl Planner {
    /// Reads the parameter's text (`None` when absent: the default), surrounding whitespace
    /// ignored.
    pub fn parse(value: Option<&str>) -> Result<Self, ParamError> {
        match value.map(str::trim) {
            None | Some("estimate") => Ok(Planner::Estimate),
            Some("measure") => Ok(Planner::Measure),
            Some("patient") => Ok(Planner::Patient),
            Some(other) => Err(ParamError::Planner {
                value: other.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planner_defaults_to_estimate_and_reads_the_three_names() {
        assert_eq!(Planner::default(), Planner::Estimate);
        assert_eq!(Planner::parse(None), Ok(Planner::Estimate));
        assert_eq!(Planner::parse(Some("estimate")), Ok(Planner::Estimate));
        assert_eq!(Planner::parse(Some(" measure ")), Ok(Planner::Measure));
        assert_eq!(Planner::parse(Some("patient")), Ok(Planner::Patient));
        assert_eq!(RANGE_FFT_PARAMS, ["planner"]);
        assert_eq!(DOPPLER_FFT_PARAMS, ["planner"]);
    }

    #[test]
    fn other_planners_are_refused_by_name() {
        for value in ["fast", "", "Estimate", "exhaustive"] {
            let e = Planner::parse(Some(value)).expect_err(value);
            assert_eq!(e.parameter(), "planner");
            assert_eq!(
                e.to_string(),
                format!("parameter planner: {value:?} is not one of estimate, measure, patient")
            );
        }
    }
}
