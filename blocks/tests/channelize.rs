//! `blocks.channelize` through the exported C table, frame after frame with its carry kept as
//! the runtime keeps it: every channel equals the whole stream mixed down to the channel, filtered
//! by the prototype and decimated, computed directly in double precision; a tone lands in its
//! channel; lost frames are silence; and the refusals a user can provoke are named.

use std::f64::consts::PI;
use std::sync::OnceLock;

use kplace_abi::{Dtype, MemorySpace};
use kplace_testkit::abi::*;
use rustfft::num_complex::Complex;

const CHANNELIZE: &str = "blocks.channelize";

fn blocks() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the entry returns a pointer to a static table.
        Loaded::linked(unsafe { &*kplace_blocks::kplace_library_entry() })
    })
}

/// A case: samples per lane in a frame, lanes, channels, prototype taps.
struct Case {
    samples: usize,
    lanes: usize,
    channels: usize,
    taps: Vec<f32>,
}

impl Case {
    fn dims(&self) -> Vec<u64> {
        vec![self.samples as u64, self.lanes as u64]
    }

    fn out_dims(&self) -> Vec<u64> {
        let steps = (self.samples / self.channels) as u64;
        vec![steps, self.lanes as u64, self.channels as u64]
    }

    /// Runs `frames` (each `samples x lanes` complex values; `None`: lost) through the block.
    fn run(&self, frames: &[Option<Vec<Complex<f32>>>]) -> Vec<Option<Vec<Complex<f64>>>> {
        let taps: Vec<String> = self.taps.iter().map(|t| format!("{t:e}")).collect();
        let (taps, channels) = (taps.join(", "), self.channels.to_string());
        // Time along axis 0, the lanes along axis 1.
        let params = [
            ("taps", taps.as_str()),
            ("channels", channels.as_str()),
            ("axis", "0"),
        ];
        let stage = Stage::new(
            desc(Dtype::CF32, &self.dims()),
            desc(Dtype::CF32, &self.out_dims()),
        )
        .params(&params);
        let state = create(blocks().kernel(CHANNELIZE), &stage).unwrap_or_else(|e| panic!("{e:?}"));
        let mut carry = Carry::new(state.carry_bytes());
        let mut missing = 0;
        frames
            .iter()
            .enumerate()
            .map(|(number, frame)| {
                let Some(frame) = frame else {
                    missing += 1;
                    return None;
                };
                let parts: Vec<f32> = frame.iter().flat_map(|c| [c.re, c.im]).collect();
                let input = Buffer::from_f32(&self.dims(), Dtype::CF32, &parts);
                let mut output = Buffer::new(Dtype::CF32, &self.out_dims());
                state
                    .launch_frame(
                        input.input(MemorySpace::HOST),
                        output.output(MemorySpace::HOST),
                        &mut carry,
                        number as u64,
                        std::mem::take(&mut missing),
                    )
                    .unwrap_or_else(|e| panic!("frame {number}: {e:?}"));
                Some(
                    output
                        .f32s()
                        .chunks_exact(2)
                        .map(|c| Complex::new(f64::from(c[0]), f64::from(c[1])))
                        .collect(),
                )
            })
            .collect()
    }

    /// The definition, over the whole stream (lost frames as zeros), in double: channel k at
    /// step m is `sum_i h[i] x[m M - i] exp(2 pi i k i / M)`. Outputs per frame, laid out
    /// `[step, lane, channel]`.
    fn reference(&self, frames: &[Option<Vec<Complex<f32>>>]) -> Vec<Vec<Complex<f64>>> {
        let (s, l, m_ch) = (self.samples, self.lanes, self.channels);
        let stream: Vec<Complex<f64>> = frames
            .iter()
            .flat_map(|f| {
                f.clone()
                    .unwrap_or_else(|| vec![Complex::default(); s * l])
                    .into_iter()
                    .map(|c| Complex::new(f64::from(c.re), f64::from(c.im)))
            })
            .collect();
        let steps = stream.len() / l / m_ch;
        let mut out = Vec::with_capacity(steps * l * m_ch);
        for m in 0..steps {
            for lane in 0..l {
                for k in 0..m_ch {
                    let mut acc = Complex::default();
                    for (i, &h) in self.taps.iter().enumerate() {
                        let Some(t) = (m * m_ch).checked_sub(i) else {
                            break;
                        };
                        let turn = 2.0 * PI * (k * i % m_ch) as f64 / m_ch as f64;
                        acc += stream[t * l + lane] * f64::from(h) * Complex::from_polar(1.0, turn);
                    }
                    out.push(acc);
                }
            }
        }
        out.chunks_exact(s * l).map(<[_]>::to_vec).collect()
    }
}

fn random_frames(
    case: &Case,
    count: usize,
    seed: u64,
    lost: &[usize],
) -> Vec<Option<Vec<Complex<f32>>>> {
    let mut rng = rng(seed);
    (0..count)
        .map(|i| {
            let parts = random_f32(&mut rng, 2 * case.samples * case.lanes, -1.0, 1.0);
            let frame = parts
                .chunks_exact(2)
                .map(|c| Complex::new(c[0], c[1]))
                .collect();
            (!lost.contains(&i)).then_some(frame)
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let mut rng = rng(5);
    let mut taps = |k: usize| random_f32(&mut rng, k, -0.5, 0.5);
    vec![
        // 8 channels of one stream, a prototype of 3 taps per branch, longer than a frame.
        Case {
            samples: 16,
            lanes: 1,
            channels: 8,
            taps: taps(24),
        },
        // 4 channels of each of 3 lanes, a prototype padded from 10 taps to 12.
        Case {
            samples: 32,
            lanes: 3,
            channels: 4,
            taps: taps(10),
        },
        // 16 channels, one tap per branch: a plain inverse DFT of each block of 16.
        Case {
            samples: 64,
            lanes: 2,
            channels: 16,
            taps: taps(16),
        },
    ]
}

fn assert_close(got: &[Complex<f64>], want: &[Complex<f64>], what: &str) {
    let scale = want.iter().map(|c| c.norm()).fold(1e-9, f64::max);
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).norm() / scale)
        .fold(0.0, f64::max);
    assert!(
        worst < 2e-6,
        "{what}: worst error {worst:e} of the largest output"
    );
}

#[test]
fn every_channel_is_the_stream_mixed_filtered_and_decimated() {
    for (i, case) in cases().iter().enumerate() {
        let frames = random_frames(case, 10, 60 + i as u64, &[]);
        let want = case.reference(&frames);
        let got = case.run(&frames);
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(g.as_ref().unwrap(), w, &format!("case {i}, frame {n}"));
        }
    }
}

#[test]
fn lost_frames_are_silence_in_the_stream() {
    for (i, case) in cases().iter().enumerate() {
        let lost = [3, 6, 7];
        let frames = random_frames(case, 10, 70 + i as u64, &lost);
        let want = case.reference(&frames);
        for (n, (g, w)) in case.run(&frames).iter().zip(&want).enumerate() {
            match g {
                None => assert!(lost.contains(&n)),
                Some(g) => assert_close(g, w, &format!("case {i}, frame {n}")),
            }
        }
    }
}

#[test]
fn a_tone_lands_in_its_channel() {
    // A windowed-sinc prototype of 8 taps per branch, cutoff half a channel.
    let (channels, per_branch) = (8usize, 8usize);
    let k_taps = channels * per_branch;
    let taps: Vec<f32> = (0..k_taps)
        .map(|n| {
            let t = n as f64 - (k_taps - 1) as f64 / 2.0;
            let x = t / channels as f64;
            let sinc = if x == 0.0 {
                1.0
            } else {
                (PI * x).sin() / (PI * x)
            };
            let hann = 0.5 - 0.5 * (2.0 * PI * n as f64 / (k_taps - 1) as f64).cos();
            (sinc * hann / channels as f64) as f32
        })
        .collect();
    let case = Case {
        samples: 256,
        lanes: 1,
        channels,
        taps,
    };
    for channel in [0usize, 3, 6] {
        let f = channel as f64 / channels as f64;
        let frames: Vec<Option<Vec<Complex<f32>>>> = (0..4)
            .map(|frame| {
                Some(
                    (0..case.samples)
                        .map(|n| {
                            let t = (frame * case.samples + n) as f64;
                            let c = Complex::from_polar(1.0, 2.0 * PI * f * t);
                            Complex::new(c.re as f32, c.im as f32)
                        })
                        .collect(),
                )
            })
            .collect();
        let got = case.run(&frames);
        // The last frame, long after the filter filled: power per channel.
        let last = got[3].as_ref().unwrap();
        let power: Vec<f64> = (0..channels)
            .map(|k| {
                last.iter()
                    .skip(k)
                    .step_by(channels)
                    .map(|c| c.norm_sqr())
                    .sum()
            })
            .collect();
        let total: f64 = power.iter().sum();
        assert!(
            power[channel] > 0.99 * total,
            "a tone at {f} cycles per sample belongs to channel {channel}: {power:?}"
        );
    }
}

#[test]
fn refusals_name_the_parameter() {
    let lib = blocks();
    let refuse = |out: &[u64], params: &[(&str, &str)], phrase: &str| {
        let params: Vec<(&str, &str)> = params.iter().copied().chain([("axis", "0")]).collect();
        let stage = Stage::new(desc(Dtype::CF32, &[32, 2]), desc(Dtype::CF32, out)).params(&params);
        assert_refuses(lib, CHANNELIZE, &stage, phrase);
    };
    refuse(
        &[4, 2, 8],
        &[("taps", "1")],
        "parameter channels is required",
    );
    refuse(
        &[4, 2, 8],
        &[("taps", "1"), ("channels", "1")],
        "at least 2 and divide the 32",
    );
    refuse(
        &[4, 2, 8],
        &[("taps", "1"), ("channels", "5")],
        "at least 2 and divide the 32",
    );
    refuse(
        &[4, 2, 8],
        &[("channels", "8")],
        "parameter taps is required",
    );
    refuse(
        &[4, 8],
        &[("taps", "1"), ("channels", "8")],
        "must hold 64 samples",
    );
    let real = Stage::new(desc(Dtype::F32, &[32]), desc(Dtype::F32, &[32]))
        .params(&[("taps", "1"), ("channels", "4")]);
    assert_refuses(lib, CHANNELIZE, &real, "input 0 must be cf32");
}
