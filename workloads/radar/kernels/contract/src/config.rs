//! Each radar kernel's `create`-time checks on an ABI [`Config`] (feature `abi`): this
//! crate's pure rules applied to the config's parameters and split, and its ports checked by
//! a backend's [`Ports`].
//!
//! What a backend gets back is typed and validated ([`RangeFftConfig`], [`DopplerFftConfig`],
//! [`CfarConfig`]); what it does with it (plans, tiling, workspace, launch) is its own. The
//! checks run in one fixed order per kernel, so when a config is wrong in several ways every
//! backend names the same fault first, in the same words.

use kplace_abi::Dtype;
use kplace_abi::TensorDesc;
use kplace_abi::export::{Config, KernelError};

use crate::cfar::{self, CfarParams, CfarWindow};
use crate::fft::{self, PLANNER_PARAM, Planner};
use crate::names::{CFAR, DOPPLER_FFT, KernelName};
use crate::{ParamError, split};
use kplace_abi::export::ports::{Ports, capacity_of, expect_dims};

impl From<ParamError> for KernelError {
    /// A refused parameter, split or shape is the caller's error: `INVALID_ARGUMENT`.
    fn from(e: ParamError) -> Self {
        KernelError::invalid(e.to_string())
    }
}

/// Fails when `kernel`, which cannot be split, is configured with tiles.
pub fn unsplit(config: &Config<'_>, kernel: KernelName) -> Result<(), KernelError> {
    Ok(split::unsplit(kernel, config.split())?)
}

/// The `planner` parameter of an FFT stage.
pub fn planner(config: &Config<'_>) -> Result<Planner, KernelError> {
    Ok(Planner::parse(config.param(PLANNER_PARAM))?)
}

/// A validated `radar.range_fft` configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeFftConfig {
    /// The `planner` parameter.
    pub planner: Planner,
    /// Input 0: `ci16 [M, N]`.
    pub input: TensorDesc,
    /// Output 0: `cf32 [N, M]`.
    pub output: TensorDesc,
    /// M: chirps per frame.
    pub chirps: u64,
    /// N: samples per chirp.
    pub samples: u64,
    /// Chirps per launch when split (a divisor of M), `None` when unsplit.
    pub tile: Option<u64>,
}

impl RangeFftConfig {
    /// Checks parameters, ports and split, in that order.
    pub fn from_config(config: &Config<'_>, ports: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(fft::RANGE_FFT_PARAMS)?;
        let planner = planner(config)?;
        let input = ports.port(
            config.inputs(),
            0,
            "input 0",
            Dtype::CI16,
            "[chirps, samples]",
        )?;
        let (chirps, samples) = (input.shape[0], input.shape[1]);
        let output = ports.port(
            config.outputs(),
            0,
            "output 0",
            Dtype::CF32,
            "[samples, chirps]",
        )?;
        expect_dims(
            &output,
            "output 0",
            &[samples, chirps],
            "range bins x chirps",
        )?;
        ports.check_cells("input 0", chirps, samples)?;
        let tile = split::range_fft_tile(config.split(), chirps)?;
        Ok(Self {
            planner,
            input,
            output,
            chirps,
            samples,
            tile,
        })
    }
}

/// A validated `radar.doppler_fft` configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DopplerFftConfig {
    /// The `planner` parameter.
    pub planner: Planner,
    /// Input 0: `cf32 [N, M]`.
    pub input: TensorDesc,
    /// Output 0: `f32 [N, M]`.
    pub output: TensorDesc,
    /// N: range bins (rows).
    pub rows: u64,
    /// M: chirps, which become Doppler bins (row length).
    pub chirps: u64,
}

impl DopplerFftConfig {
    /// Checks parameters, split and ports, in that order.
    pub fn from_config(config: &Config<'_>, ports: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(fft::DOPPLER_FFT_PARAMS)?;
        let planner = planner(config)?;
        unsplit(config, DOPPLER_FFT)?;
        let input = ports.port(
            config.inputs(),
            0,
            "input 0",
            Dtype::CF32,
            "[range bins, chirps]",
        )?;
        let output = ports.port(
            config.outputs(),
            0,
            "output 0",
            Dtype::F32,
            "[range bins, Doppler bins]",
        )?;
        expect_dims(&output, "output 0", input.dims(), "the input's shape")?;
        let (rows, chirps) = (input.shape[0], input.shape[1]);
        ports.check_cells("input 0", rows, chirps)?;
        Ok(Self {
            planner,
            input,
            output,
            rows,
            chirps,
        })
    }
}

/// A validated `radar.cfar` configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CfarConfig {
    /// Window, alpha and threshold factor.
    pub params: CfarParams,
    /// Input 0: `f32 [N, M]`.
    pub input: TensorDesc,
    /// Output 0: `detections [capacity]`.
    pub output: TensorDesc,
    /// N: range rows (fits `u32`).
    pub rows: u64,
    /// M: Doppler columns (fits `u32`).
    pub cols: u64,
    /// Records the output list has room for.
    pub capacity: u32,
}

impl CfarConfig {
    /// Checks split, parameters (guard and train, then pfa and scale), the input map, the
    /// window against it, then the output list, in that order.
    pub fn from_config(config: &Config<'_>, ports: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(cfar::PARAMS)?;
        unsplit(config, CFAR)?;
        let window = CfarWindow::new(
            config.parse_param::<u32>("guard")?,
            config.parse_param::<u32>("train")?,
        )?;
        let params = CfarParams::new(
            window,
            config.parse_param::<f64>("pfa")?,
            config.parse_param::<f64>("scale")?,
        )?;
        let input = ports.port(
            config.inputs(),
            0,
            "input 0",
            Dtype::F32,
            "[range bins, Doppler bins]",
        )?;
        let (rows, cols) = (input.shape[0], input.shape[1]);
        ports.check_cells("input 0", rows, cols)?;
        window.fit(rows, cols)?;
        let output = ports.port(
            config.outputs(),
            0,
            "output 0",
            Dtype::RECORDS,
            "[capacity]",
        )?;
        let capacity = capacity_of(&output, "output 0")?;
        expect_dims(
            &output,
            "output 0",
            &[u64::from(capacity)],
            "a detection list",
        )?;
        Ok(Self {
            params,
            input,
            output,
            rows,
            cols,
            capacity,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::test_ports::{DEVICE, HOST, desc};
    use std::ffi::CString;

    use kplace_abi::{KernelConfig, Param, SPLIT_NONE};

    use super::*;
    use crate::cfar::{DEFAULT_PFA, alpha_for_pfa, threshold_scale};

    /// Runs `check` on a config of `params`, ports and split.
    fn with_config<T>(
        params: &[(&str, &str)],
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        split: Option<(u32, u64)>,
        check: impl FnOnce(&Config<'_>) -> Result<T, KernelError>,
    ) -> Result<T, KernelError> {
        let text: Vec<(CString, CString)> = params
            .iter()
            .map(|(n, v)| {
                (
                    CString::new(*n).expect("name"),
                    CString::new(*v).expect("value"),
                )
            })
            .collect();
        let params: Vec<Param> = text
            .iter()
            .map(|(n, v)| Param {
                name: n.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let raw = KernelConfig {
            params: params.as_ptr(),
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_params: params.len() as u32,
            n_inputs: inputs.len() as u32,
            n_outputs: outputs.len() as u32,
            split_axis: split.map_or(SPLIT_NONE, |(axis, _)| axis),
            tile: split.map_or(0, |(_, tile)| tile),
            device_ordinal: 0,
            reserved: 0,
        };
        // SAFETY: every pointer in `raw` points into the vectors and slices above, which
        // outlive the config.
        let config = unsafe { Config::from_raw(&raw) }?;
        check(&config)
    }

    fn cfar(
        params: &[(&str, &str)],
        rows: u64,
        cols: u64,
        split: Option<(u32, u64)>,
        ports: &Ports,
    ) -> Result<CfarConfig, KernelError> {
        let input = desc(ports.memory, Dtype::F32, &[rows, cols]);
        let output = desc(ports.memory, Dtype::RECORDS, &[100]);
        with_config(params, &[input], &[output], split, |c| {
            CfarConfig::from_config(c, ports)
        })
    }

    fn message<T: std::fmt::Debug>(r: Result<T, KernelError>) -> String {
        r.expect_err("refused").message
    }

    #[test]
    fn cfar_defaults_and_values() {
        let c = cfar(&[], 128, 64, None, &HOST).expect("defaults");
        assert_eq!(c.params.window(), CfarWindow::default());
        assert_eq!((c.rows, c.cols, c.capacity), (128, 64, 100));
        assert_eq!(
            c.params.alpha().to_bits(),
            alpha_for_pfa(DEFAULT_PFA, 416).to_bits()
        );
        let c = cfar(
            &[("guard", "1"), ("train", "4"), ("scale", "14")],
            64,
            64,
            None,
            &DEVICE,
        )
        .expect("scale");
        assert_eq!(c.params.alpha(), 14.0);
        assert_eq!(
            c.params.scale().to_bits(),
            threshold_scale(14.0, 11 * 11 - 3 * 3).to_bits()
        );
    }

    #[test]
    fn cfar_checks_run_in_the_promised_order() {
        let bad = |params: &[(&str, &str)], split| message(cfar(params, 128, 64, split, &HOST));
        // Unknown parameters, then the split, then guard and train, then pfa and scale.
        assert!(bad(&[("gaurd", "2")], Some((0, 8))).starts_with("unknown parameter gaurd"));
        assert!(bad(&[("guard", "x")], Some((0, 8))).starts_with("radar.cfar cannot be split"));
        assert!(bad(&[("train", "0"), ("pfa", "abc")], None).contains("train must be at least 1"));
        assert!(bad(&[("train", "600"), ("pfa", "2")], None).contains("exceeds the largest"));
        assert!(bad(&[("pfa", "abc")], None).starts_with("parameter pfa: cannot parse"));
        assert!(bad(&[("pfa", "2"), ("scale", "1")], None).contains("both given"));
        // Then the map: the device's 32-bit cell count before the window's fit.
        let big = message(cfar(&[], 1 << 16, 1 << 16, None, &DEVICE));
        assert!(big.contains("more than 2^32 - 1 elements"), "{big}");
        let bins = message(cfar(&[], 1 << 32, 64, None, &HOST));
        assert!(
            bins.contains("more bins than detection records can name"),
            "{bins}"
        );
        assert!(message(cfar(&[], 128, 16, None, &HOST)).contains("does not fit the 128 x 16"));
    }

    #[test]
    fn fft_stages_check_planner_ports_and_split() {
        let range = |split, chirps: u64, samples: u64, ports: &Ports| {
            let input = desc(ports.memory, Dtype::CI16, &[chirps, samples]);
            let output = desc(ports.memory, Dtype::CF32, &[samples, chirps]);
            with_config(&[("planner", "measure")], &[input], &[output], split, |c| {
                RangeFftConfig::from_config(c, ports)
            })
        };
        let c = range(Some((0, 16)), 64, 32, &HOST).expect("range");
        assert_eq!(
            (c.planner, c.chirps, c.samples, c.tile),
            (Planner::Measure, 64, 32, Some(16))
        );
        assert_eq!(range(None, 64, 32, &DEVICE).map(|c| c.tile), Ok(None));
        // The device's cell count comes before the split.
        let huge = message(range(Some((0, 5)), 1 << 16, 1 << 16, &DEVICE));
        assert!(huge.contains("more than 2^32 - 1 elements"), "{huge}");
        assert!(message(range(Some((0, 5)), 64, 32, &HOST)).contains("does not divide"));

        let doppler = |params: &[(&str, &str)], split, ports: &Ports| {
            let input = desc(ports.memory, Dtype::CF32, &[32, 64]);
            let output = desc(ports.memory, Dtype::F32, &[32, 64]);
            with_config(params, &[input], &[output], split, |c| {
                DopplerFftConfig::from_config(c, ports)
            })
        };
        let c = doppler(&[], None, &DEVICE).expect("doppler");
        assert_eq!((c.planner, c.rows, c.chirps), (Planner::Estimate, 32, 64));
        // The planner comes before the split.
        let both = message(doppler(&[("planner", "fast")], Some((0, 8)), &HOST));
        assert!(both.starts_with("parameter planner"), "{both}");
        let split = message(doppler(&[], Some((0, 8)), &HOST));
        assert_eq!(
            split,
            "radar.doppler_fft cannot be split (asked for tiles of 8 along axis 0)"
        );
    }
}
