//! `blocks.fir` through the exported C table, frame after frame with the carry kept between
//! launches as the runtime keeps it: its output over a whole stream is one long convolution of
//! that stream, decimated, bit for bit, whatever the frame length against the filter's, with
//! lost frames counted as silence; and every refusal a user can provoke is named.

use std::sync::OnceLock;

use kplace_abi::{Dtype, MemorySpace, Tile};
use kplace_testkit::abi::*;

const FIR: &str = "blocks.fir";

fn blocks() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the entry returns a pointer to a static table.
        Loaded::linked(unsafe { &*kplace_blocks::kplace_library_entry() })
    })
}

/// One case: the frame's dimensions, the time axis, scalars per sample, taps and decimation.
struct Case {
    dims: Vec<u64>,
    axis: usize,
    parts: usize,
    taps: Vec<f32>,
    decimation: usize,
}

impl Case {
    fn samples(&self) -> usize {
        self.dims[..=self.axis].iter().product::<u64>() as usize
    }

    fn lanes(&self) -> usize {
        self.dims[self.axis + 1..].iter().product::<u64>() as usize
    }

    fn dtype(&self) -> Dtype {
        if self.parts == 2 {
            Dtype::CF32
        } else {
            Dtype::F32
        }
    }

    /// The output's dimensions: the decimated time steps, then the lanes.
    fn out_dims(&self) -> Vec<u64> {
        vec![
            (self.samples() / self.decimation) as u64,
            self.lanes() as u64,
        ]
    }

    fn params(&self) -> Vec<(String, String)> {
        let taps: Vec<String> = self.taps.iter().map(|t| format!("{t:e}")).collect();
        vec![
            ("taps".into(), taps.join(", ")),
            ("decimation".into(), self.decimation.to_string()),
            ("axis".into(), self.axis.to_string()),
        ]
    }

    /// [`Case::params`], each frame filtered on its own.
    fn bursts(&self) -> Vec<(String, String)> {
        let mut params = self.params();
        params.push(("stream".into(), "false".into()));
        params
    }
}

/// The reference: one long convolution of each lane's whole stream (lost frames as zeros),
/// decimated, summed in single precision from tap 0 up, as the block documents.
fn long_convolution(case: &Case, frames: &[Option<Vec<f32>>]) -> Vec<Vec<f32>> {
    let (s, step) = (case.samples(), case.lanes() * case.parts);
    let stream: Vec<f32> = frames
        .iter()
        .flat_map(|f| f.clone().unwrap_or_else(|| vec![0.0; s * step]))
        .collect();
    let steps = stream.len() / step;
    let outputs: Vec<f32> = (0..steps / case.decimation)
        .flat_map(|m| {
            let t = m * case.decimation;
            (0..step).map(move |j| (t, j))
        })
        .map(|(t, j)| {
            let mut acc = 0.0f32;
            for (k, &h) in case.taps.iter().enumerate() {
                let x = if k <= t {
                    stream[(t - k) * step + j]
                } else {
                    0.0
                };
                acc += h * x;
            }
            acc
        })
        .collect();
    outputs
        .chunks_exact(s / case.decimation * step)
        .map(<[f32]>::to_vec)
        .collect()
}

/// Runs `frames` through the block in order, skipping the lost ones (`None`) as the runtime
/// does, telling the next launch how many were lost. Returns the processed frames' outputs.
fn filter(case: &Case, frames: &[Option<Vec<f32>>]) -> Vec<Option<Vec<f32>>> {
    filter_with(case, &case.params(), frames)
}

fn filter_with(
    case: &Case,
    params: &[(String, String)],
    frames: &[Option<Vec<f32>>],
) -> Vec<Option<Vec<f32>>> {
    let params: Vec<(&str, &str)> = params
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let stage = Stage::new(
        desc(case.dtype(), &case.dims),
        desc(case.dtype(), &case.out_dims()),
    )
    .params(&params);
    let state = create(blocks().kernel(FIR), &stage).unwrap_or_else(|e| panic!("{e:?}"));
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
            let input = Buffer::from_f32(&case.dims, case.dtype(), frame);
            let mut output = Buffer::new(case.dtype(), &case.out_dims());
            state
                .launch_frame(
                    input.input(MemorySpace::HOST),
                    output.output(MemorySpace::HOST),
                    &mut carry,
                    number as u64,
                    std::mem::take(&mut missing),
                )
                .unwrap_or_else(|e| panic!("frame {number}: {e:?}"));
            Some(output.f32s().to_vec())
        })
        .collect()
}

fn random_frames(case: &Case, count: usize, seed: u64, lost: &[usize]) -> Vec<Option<Vec<f32>>> {
    let len = case.samples() * case.lanes() * case.parts;
    let mut rng = rng(seed);
    (0..count)
        .map(|i| {
            let frame = random_f32(&mut rng, len, -1.0, 1.0);
            (!lost.contains(&i)).then_some(frame)
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let mut rng = rng(11);
    let mut taps = |k: usize| random_f32(&mut rng, k, -0.5, 0.5);
    vec![
        // One real stream, a filter much longer than a frame: the history spans frames.
        Case {
            dims: vec![8],
            axis: 0,
            parts: 1,
            taps: taps(33),
            decimation: 1,
        },
        // One complex stream in rows of packets, decimating by 4.
        Case {
            dims: vec![4, 16],
            axis: 1,
            parts: 2,
            taps: taps(32),
            decimation: 4,
        },
        // Eight channels of 4 x 16 samples, time along axes 0 and 1.
        Case {
            dims: vec![4, 16, 8],
            axis: 1,
            parts: 2,
            taps: taps(7),
            decimation: 2,
        },
        // A single tap: a gain, no history.
        Case {
            dims: vec![6, 3],
            axis: 0,
            parts: 1,
            taps: vec![0.75],
            decimation: 3,
        },
    ]
}

#[test]
fn frame_after_frame_it_is_one_long_convolution_bit_for_bit() {
    for (i, case) in cases().iter().enumerate() {
        let frames = random_frames(case, 12, 100 + i as u64, &[]);
        let want = long_convolution(case, &frames);
        let got: Vec<Vec<f32>> = filter(case, &frames).into_iter().flatten().collect();
        assert_eq!(got.len(), want.len());
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w): (Vec<u32>, Vec<u32>) = (
                g.iter().map(|v| v.to_bits()).collect(),
                w.iter().map(|v| v.to_bits()).collect(),
            );
            assert!(
                g == w,
                "case {i}, frame {n}: differs from the long convolution"
            );
        }
    }
}

#[test]
fn lost_frames_are_silence_in_the_stream() {
    for (i, case) in cases().iter().enumerate() {
        // Lost: one frame, then three in a row (longer than the 33-tap history in case 0).
        let lost = [2, 6, 7, 8];
        let frames = random_frames(case, 12, 200 + i as u64, &lost);
        let want = long_convolution(case, &frames);
        let got = filter(case, &frames);
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            match g {
                None => assert!(lost.contains(&n)),
                Some(g) => assert!(
                    g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "case {i}, frame {n}: differs from the stream with its losses as zeros"
                ),
            }
        }
    }
}

#[test]
fn without_the_stream_each_frame_is_filtered_on_its_own_and_nothing_is_carried() {
    for (i, case) in cases().iter().enumerate() {
        let frames = random_frames(case, 4, 400 + i as u64, &[]);
        let params = case.bursts();
        let got = filter_with(case, &params, &frames);
        for (n, frame) in frames.iter().enumerate() {
            let alone = long_convolution(case, std::slice::from_ref(frame));
            assert_eq!(got[n].as_ref(), Some(&alone[0]), "case {i}, frame {n}");
        }
        let pairs: Vec<(&str, &str)> = params
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let stage = Stage::new(
            desc(case.dtype(), &case.dims),
            desc(case.dtype(), &case.out_dims()),
        )
        .params(&pairs);
        let state = create(blocks().kernel(FIR), &stage).unwrap();
        assert_eq!(
            state.carry_bytes(),
            0,
            "so the runtime does not serialize it"
        );
    }
}

#[test]
fn the_long_convolution_is_the_filter_in_double_precision() {
    // The order-exact reference above, checked once against sums in double: an independent
    // check that it convolves at all.
    let case = &cases()[1];
    let frames = random_frames(case, 6, 300, &[]);
    let want = long_convolution(case, &frames);
    let step = case.lanes() * case.parts;
    let stream: Vec<f64> = frames
        .iter()
        .flatten()
        .flatten()
        .map(|&v| f64::from(v))
        .collect();
    let flat: Vec<f32> = want.concat();
    for (index, &got) in flat.iter().enumerate() {
        let (m, j) = (index / step, index % step);
        let t = m * case.decimation;
        let exact: f64 = (0..case.taps.len().min(t + 1))
            .map(|k| f64::from(case.taps[k]) * stream[(t - k) * step + j])
            .sum();
        assert!(
            (f64::from(got) - exact).abs() < 1e-5,
            "output {index}: {got} vs {exact}"
        );
    }
}

#[test]
fn refusals_name_the_parameter() {
    let lib = blocks();
    let refuse = |dims: &[u64], out: &[u64], params: &[(&str, &str)], phrase: &str| {
        let stage = Stage::new(desc(Dtype::CF32, dims), desc(Dtype::CF32, out)).params(params);
        assert_refuses(lib, FIR, &stage, phrase);
    };
    refuse(&[16], &[16], &[], "parameter taps is required");
    refuse(&[16], &[16], &[("taps", "")], "1 to 65536 coefficients");
    refuse(&[16], &[16], &[("taps", "1, x")], "item 1");
    refuse(&[16], &[16], &[("taps", "1, inf")], "not a finite number");
    refuse(
        &[16],
        &[5],
        &[("taps", "1"), ("decimation", "3")],
        "must divide the 16 samples",
    );
    refuse(
        &[16],
        &[5],
        &[("taps", "1"), ("decimation", "0")],
        "must divide",
    );
    refuse(
        &[16],
        &[5],
        &[("taps", "1"), ("decimation", "4")],
        "must hold 4 samples",
    );
    refuse(
        &[4, 16],
        &[4, 16],
        &[("taps", "1"), ("axis", "2")],
        "has 2 axes",
    );
    refuse(
        &[16],
        &[16],
        &[("taps", "1"), ("gain", "2")],
        "unknown parameter gain",
    );
    let split = Stage::new(desc(Dtype::CF32, &[4, 16]), desc(Dtype::CF32, &[4, 16]))
        .params(&[("taps", "1")])
        .split(0, 2);
    assert_refuses(lib, FIR, &split, "cannot be split");
    let ints =
        Stage::new(desc(Dtype::CI16, &[16]), desc(Dtype::CI16, &[16])).params(&[("taps", "1")]);
    assert_refuses(lib, FIR, &ints, "must be cf32 or f32");
}

#[test]
fn a_launch_without_its_carry_is_refused() {
    let stage =
        Stage::new(desc(Dtype::F32, &[8]), desc(Dtype::F32, &[8])).params(&[("taps", "1, 2, 3")]);
    let state = create(blocks().kernel(FIR), &stage).unwrap();
    assert_eq!(state.carry_bytes(), 2 * 4, "two samples of history");
    let input = Buffer::from_f32(&[8], Dtype::F32, &[1.0; 8]);
    let mut output = Buffer::new(Dtype::F32, &[8]);
    let tile = Tile { begin: 0, count: 8 };
    let (status, text) = state
        .launch(
            input.input(MemorySpace::HOST),
            output.output(MemorySpace::HOST),
            tile,
            std::ptr::null_mut(),
        )
        .unwrap_err();
    assert_eq!(status, kplace_abi::Status::INVALID_ARGUMENT);
    assert!(
        text.contains("blocks.fir") && text.contains("carry of 0 bytes"),
        "{text}"
    );
}

/// The FIR forms docs/graphs.md gives for GNU Radio's Keep 1 in N, Delay and Moving Average:
/// every Nth sample exactly, the stream N samples late exactly (zeros first, across frames),
/// and the mean of the last N samples.
#[test]
fn the_fir_forms_of_keep_one_in_n_delay_and_moving_average_do_what_they_say() {
    let dims = vec![4u64, 6, 2];
    let frames = random_frames(
        &Case {
            dims: dims.clone(),
            axis: 1,
            parts: 2,
            taps: vec![1.0],
            decimation: 1,
        },
        5,
        21,
        &[],
    );
    let stream: Vec<f32> = frames.iter().flatten().flatten().copied().collect();
    let step = 2 * 2; // two lanes of complex samples
    let total = 5 * 24; // five frames of 4 x 6 samples
    let form = |taps: Vec<f32>, decimation: usize, carried: bool| {
        let case = Case {
            dims: dims.clone(),
            axis: 1,
            parts: 2,
            taps,
            decimation,
        };
        let params = if carried {
            case.params()
        } else {
            case.bursts()
        };
        let out: Vec<f32> = filter_with(&case, &params, &frames)
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        out
    };
    // Keep 1 in 3: taps [1], decimation 3, each frame on its own.
    let kept: Vec<f32> = (0..total / 3)
        .flat_map(|m| stream[3 * m * step..(3 * m + 1) * step].to_vec())
        .collect();
    assert_eq!(form(vec![1.0], 3, false), kept);
    // Delay by 5: five zero taps, then 1, the history carried across the frames.
    let delayed: Vec<f32> = (0..total)
        .flat_map(|t| match t.checked_sub(5) {
            Some(s) => stream[s * step..(s + 1) * step].to_vec(),
            None => vec![0.0; step],
        })
        .collect();
    assert_eq!(form(vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 1, true), delayed);
    // Moving average of 4: four taps of 1/4, against the mean of the last four in double.
    let averaged = form(vec![0.25; 4], 1, true);
    for t in 0..total {
        for j in 0..step {
            let sum: f64 = (0..4)
                .filter_map(|k| t.checked_sub(k))
                .map(|s| f64::from(stream[s * step + j]))
                .sum();
            let got = f64::from(averaged[t * step + j]);
            assert!(
                (got - sum / 4.0).abs() < 1e-6,
                "sample {t} lane part {j}: {got}"
            );
        }
    }
}
