//! Synthesized recordings (`kplace record`): tones in complex Gaussian noise, continuous from
//! frame to frame, for any graph whose source is numeric (integers at full scale, complex or
//! real: a real source takes the real part); on a source with a
//! channel axis, each tone is a plane wave arriving at the array from its own angle.
//!
//! The array is uniform and linear, its elements half a wavelength apart: channel `c` sees a
//! tone arriving from `theta` (radians from broadside) `pi * c * sin(theta)` ahead of channel
//! 0. Guarantees: a synthesis that would alias (a frequency outside [-0.5, 0.5)), clip (the
//! amplitudes plus four noise deviations above full scale) or exceed what a recording may
//! hold is refused before anything is allocated.

use std::f64::consts::{PI, TAU};

use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use super::recording::RECORDING_BUDGET_BYTES;
use super::scalars;
use kplace_core::model::graph::Graph;
use kplace_core::plan::human_bytes;

/// One tone: a complex exponential, or on an array a plane wave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tone {
    /// Cycles per sample, in [-0.5, 0.5).
    pub frequency: f64,
    /// A fraction of full scale.
    pub amplitude: f64,
    /// Where it arrives from, in degrees from broadside, in [-90, 90] (0 on a source without
    /// a channel axis).
    pub angle_deg: f64,
}

impl Tone {
    /// A tone at `frequency` and `amplitude`, arriving from broadside.
    pub fn new(frequency: f64, amplitude: f64) -> Tone {
        Tone {
            frequency,
            amplitude,
            angle_deg: 0.0,
        }
    }
}

/// Why a recording cannot be synthesized as asked.
#[derive(Debug, thiserror::Error)]
pub enum SynthesisError {
    /// A tone's frequency is outside [-0.5, 0.5) cycles per sample.
    #[error("tone frequency {0} is outside [-0.5, 0.5) cycles per sample")]
    Frequency(f64),
    /// A tone's amplitude is negative or not a number.
    #[error("tone amplitude {0} is not a number >= 0")]
    Amplitude(f64),
    /// A tone's angle is outside [-90, 90] degrees.
    #[error("tone angle {0} is outside [-90, 90] degrees from broadside")]
    Angle(f64),
    /// The noise is negative or not a number.
    #[error("noise {0} is not a number >= 0")]
    Noise(f64),
    /// The tones and noise would clip.
    #[error(
        "the tones' amplitudes plus four noise deviations reach {0:.3} of full scale; keep them at most 1"
    )]
    Clips(f64),
    /// The sample rate is not positive.
    #[error("sample rate {0} is not positive")]
    SampleRate(f64),
    /// The source tensor's elements are not numbers.
    #[error("the source {tensor} is {dtype}: a synthesized recording holds numbers")]
    NotNumeric {
        /// The source tensor.
        tensor: String,
        /// Its element type.
        dtype: &'static str,
    },
    /// More frames than a recording may hold.
    #[error(
        "{frames} frames of {} each exceed the {} a recording may hold",
        human_bytes(*.frame_bytes),
        human_bytes(RECORDING_BUDGET_BYTES)
    )]
    TooLarge {
        /// Frames asked for.
        frames: u64,
        /// Bytes of each.
        frame_bytes: u64,
    },
    /// The noise's distribution cannot be made.
    #[error("{0}")]
    Normal(rand_distr::NormalError),
}

/// What a synthesized recording holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Synthesis {
    /// The tones.
    pub tones: Vec<Tone>,
    /// The noise's standard deviation per real component, as a fraction of full scale.
    pub noise: f64,
    /// The noise generator's seed.
    pub seed: u64,
    /// Samples per second per channel, written to the metadata.
    pub sample_rate: f64,
}

impl Synthesis {
    /// Checks the tones and noise: frequencies in [-0.5, 0.5), angles in [-90, 90],
    /// amplitudes and noise finite and non-negative, their sum at most full scale (1) so
    /// that `ci16` never clips; a positive sample rate.
    pub fn check(&self) -> Result<(), SynthesisError> {
        for tone in &self.tones {
            let Tone {
                frequency: f,
                amplitude: a,
                angle_deg,
            } = *tone;
            if !(-0.5..0.5).contains(&f) {
                return Err(SynthesisError::Frequency(f));
            }
            if !(a.is_finite() && a >= 0.0) {
                return Err(SynthesisError::Amplitude(a));
            }
            if !(-90.0..=90.0).contains(&angle_deg) {
                return Err(SynthesisError::Angle(angle_deg));
            }
        }
        if !(self.noise.is_finite() && self.noise >= 0.0) {
            return Err(SynthesisError::Noise(self.noise));
        }
        let peak: f64 = self.tones.iter().map(|t| t.amplitude).sum::<f64>() + 4.0 * self.noise;
        if peak > 1.0 {
            return Err(SynthesisError::Clips(peak));
        }
        if !(self.sample_rate.is_finite() && self.sample_rate > 0.0) {
            return Err(SynthesisError::SampleRate(self.sample_rate));
        }
        Ok(())
    }
}

/// Where each element of the source sits in the stream: its channel, and its sample within
/// the frame (its index with the channel axis left out, row-major).
struct Layout {
    /// Elements after the channel axis, per index along it (1 without one).
    inner: u64,
    /// The channel axis's extent (1 without one).
    channels: u64,
}

impl Layout {
    fn of(graph: &Graph) -> Layout {
        let tensor = graph.tensor(graph.source.tensor);
        match graph.source.channel_axis {
            Some(axis) => Layout {
                inner: tensor.shape[axis + 1..].iter().product(),
                channels: tensor.shape[axis],
            },
            None => Layout {
                inner: 1,
                channels: 1,
            },
        }
    }

    /// Element `e`'s channel and sample within its frame.
    fn at(&self, e: u64) -> (u64, u64) {
        let channel = (e / self.inner) % self.channels;
        let outer = e / (self.inner * self.channels);
        (channel, outer * self.inner + e % self.inner)
    }
}

/// `frames` frames of `graph`'s source tensor (any numeric dtype; a real tensor takes the real
/// part) holding `synthesis`: sample `n` of channel `c` (`n` counted across frames) is
/// `sum a * exp(i (2 pi f n + pi c sin(theta))) + noise`, scaled to full scale (the type's
/// largest value for integers, rounded and clamped; 1 for floats:
/// [`scalars::encode`]). Without a channel axis every element is the next sample of one
/// channel.
pub fn synthesize(
    graph: &Graph,
    frames: u64,
    synthesis: &Synthesis,
) -> Result<Vec<Vec<u8>>, SynthesisError> {
    synthesis.check()?;
    let tensor = graph.tensor(graph.source.tensor);
    let Some(element) = tensor.dtype.element() else {
        return Err(SynthesisError::NotNumeric {
            tensor: tensor.name.clone(),
            dtype: tensor.dtype.name().unwrap_or("?"),
        });
    };
    frames
        .checked_mul(tensor.bytes)
        .filter(|&b| b <= RECORDING_BUDGET_BYTES)
        .ok_or(SynthesisError::TooLarge {
            frames,
            frame_bytes: tensor.bytes,
        })?;
    let layout = Layout::of(graph);
    let elements = tensor.bytes / element.bytes();
    let per_frame = elements / layout.channels;
    let steering: Vec<f64> = synthesis
        .tones
        .iter()
        .map(|t| PI * t.angle_deg.to_radians().sin())
        .collect();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(synthesis.seed);
    let noise = Normal::new(0.0, synthesis.noise).map_err(SynthesisError::Normal)?;
    let mut out = Vec::with_capacity(frames as usize);
    for frame_index in 0..frames {
        let mut frame = Vec::with_capacity(tensor.bytes as usize);
        for e in 0..elements {
            let (channel, sample) = layout.at(e);
            let n = frame_index * per_frame + sample;
            let (mut re, mut im) = (noise.sample(&mut rng), noise.sample(&mut rng));
            for (tone, steer) in synthesis.tones.iter().zip(&steering) {
                // The phase is reduced before it is scaled, so a long stream keeps its precision.
                let phase =
                    TAU * (tone.frequency * n as f64).rem_euclid(1.0) + steer * channel as f64;
                re += tone.amplitude * phase.cos();
                im += tone.amplitude * phase.sin();
            }
            scalars::encode(element.scalar, re, &mut frame);
            if element.complex {
                scalars::encode(element.scalar, im, &mut frame);
            }
        }
        out.push(frame);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;
    use kplace_core::model::graph::Overrides;

    /// A graph of one stage whose source `x` is `dtype [4, 8]`, `source` added to its source
    /// line (`, channel_axis: 1`); the recording tests use it too.
    pub(crate) fn graph(dtype: &str, source: &str) -> Graph {
        let text = format!(
            "name: g\ndims: {{N: 8, M: 4}}\nsource: {{tensor: x, packet_axis: 0{source}}}\n\
             tensors:\n  - {{name: x, dtype: {dtype}, shape: [M, N]}}\n  - {{name: y, dtype: f32, shape: [M, N]}}\n\
             stages:\n  - {{name: s, kernel: k, inputs: [x], outputs: [y]}}\nsinks: [y]\n"
        );
        Graph::parse(&text, Path::new("g.yaml"), &Overrides::default()).unwrap()
    }

    /// Two noiseless tones at 1 MS/s.
    pub(crate) fn tones() -> Synthesis {
        Synthesis {
            tones: vec![Tone::new(0.125, 0.5), Tone::new(-0.25, 0.25)],
            noise: 0.0,
            seed: 1,
            sample_rate: 1e6,
        }
    }

    /// Element `at` of `frame`, a cf32 frame.
    fn sample(frame: &[u8], at: usize) -> (f64, f64) {
        let f = |i: usize| f32::from_le_bytes(frame[i..i + 4].try_into().unwrap()) as f64;
        (f(at * 8), f(at * 8 + 4))
    }

    fn assert_near(got: (f64, f64), want: (f64, f64), what: &str) {
        assert!(
            (got.0 - want.0).abs() < 1e-6 && (got.1 - want.1).abs() < 1e-6,
            "{what}: {got:?} != {want:?}"
        );
    }

    #[test]
    fn tones_are_where_they_were_put_and_continue_across_frames() {
        let frames = synthesize(&graph("cf32", ""), 2, &tones()).unwrap();
        for k in [0usize, 5, 31, 32, 47] {
            let n = k as f64;
            let want = (
                0.5 * (TAU * 0.125 * n).cos() + 0.25 * (TAU * -0.25 * n).cos(),
                0.5 * (TAU * 0.125 * n).sin() + 0.25 * (TAU * -0.25 * n).sin(),
            );
            assert_near(sample(&frames[k / 32], k % 32), want, &format!("{k}"));
        }
    }

    #[test]
    fn on_an_array_each_tone_is_a_plane_wave_from_its_angle() {
        let wave = Synthesis {
            tones: vec![Tone {
                frequency: 0.125,
                amplitude: 0.5,
                angle_deg: 30.0,
            }],
            ..tones()
        };
        // Snapshot-major, [M snapshots, N channels]: one packet per snapshot of every channel.
        let rows = synthesize(&graph("cf32", ", channel_axis: 1"), 2, &wave).unwrap();
        // Channel-major, [M channels, N samples]: one packet per channel.
        let columns = synthesize(&graph("cf32", ", channel_axis: 0"), 2, &wave).unwrap();
        let want = |n: u64, c: u64| {
            let phase = TAU * 0.125 * n as f64 + PI * c as f64 * 0.5;
            (0.5 * phase.cos(), 0.5 * phase.sin())
        };
        for frame in 0..2u64 {
            for (snapshot, channel) in [(0u64, 0u64), (0, 7), (3, 2), (1, 5)] {
                // 4 snapshots of 8 channels: sample `snapshot` of the frame.
                let at = (snapshot * 8 + channel) as usize;
                let got = sample(&rows[frame as usize], at);
                assert_near(got, want(frame * 4 + snapshot, channel), "snapshot-major");
            }
            for (channel, n) in [(0u64, 0u64), (3, 7), (1, 2)] {
                // 4 channels of 8 samples.
                let at = (channel * 8 + n) as usize;
                let got = sample(&columns[frame as usize], at);
                assert_near(got, want(frame * 8 + n, channel), "channel-major");
            }
        }
    }

    #[test]
    fn every_numeric_source_holds_the_tones_at_its_full_scale() {
        let one = Synthesis {
            tones: vec![Tone::new(0.125, 0.5)],
            ..tones()
        };
        for dtype in ["ci8", "ci16", "cf16", "cf64", "i8", "i32", "f16", "f64"] {
            let g = graph(dtype, "");
            let element = g.tensor(g.source.tensor).dtype.element().unwrap();
            let frames = synthesize(&g, 2, &one).unwrap();
            assert_eq!(frames[1].len() as u64, 32 * element.bytes(), "{dtype}");
            let (width, part) = (element.bytes() as usize, element.scalar.bytes() as usize);
            let scale = scalars::full_scale(element.scalar);
            // One step of the type, or binary16's relative precision.
            let step = (1.0 / scale).max(1e-3);
            for n in 0..32 {
                let phase = TAU * 0.125 * (32 + n) as f64;
                let at = n as usize * width;
                let re = scalars::decode(element.scalar, &frames[1][at..at + part]) / scale;
                assert!((re - 0.5 * phase.cos()).abs() <= step, "{dtype} {n}: {re}");
                if element.complex {
                    let im = scalars::decode(element.scalar, &frames[1][at + part..at + width]);
                    assert!(
                        (im / scale - 0.5 * phase.sin()).abs() <= step,
                        "{dtype} {n}"
                    );
                }
            }
        }
        let e = synthesize(&graph("records", ""), 1, &one)
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds numbers"), "{e}");
    }

    #[test]
    fn a_synthesis_that_would_clip_or_alias_is_refused() {
        let g = graph("ci16", "");
        let one = |tone: Tone| Synthesis {
            tones: vec![tone],
            ..tones()
        };
        for (s, phrase) in [
            (one(Tone::new(0.5, 0.1)), "outside [-0.5, 0.5)"),
            (
                Synthesis {
                    noise: 0.1,
                    ..one(Tone::new(0.1, 0.9))
                },
                "full scale",
            ),
            (
                one(Tone {
                    angle_deg: 91.0,
                    ..Tone::new(0.1, 0.1)
                }),
                "tone angle 91",
            ),
            (
                Synthesis {
                    noise: -1.0,
                    ..tones()
                },
                "noise -1",
            ),
            (
                Synthesis {
                    sample_rate: 0.0,
                    ..tones()
                },
                "sample rate 0",
            ),
        ] {
            let e = synthesize(&g, 1, &s).unwrap_err().to_string();
            assert!(e.contains(phrase), "{e}");
        }
        let e = synthesize(&g, u64::MAX, &tones()).unwrap_err().to_string();
        assert!(e.contains("exceed"), "{e}");
    }
}
