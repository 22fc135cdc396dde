//! The range and Doppler FFT kernels against rustfft in f64 (the oracle), tiled launches
//! against untiled ones, and the kernels' parameter and shape checks.
//!
//! Error bound: for f32 FFTs of these sizes the maximum absolute error is a few 1e-7 of the
//! largest output magnitude (FFTW's error grows like sqrt(log N) ulps); the tests assert
//! `max |out - oracle| / max |oracle| <= 1e-5`, which still catches any wrong twiddle, window
//! or index (those give errors of order 1).

mod common;

use std::f64::consts::PI;

use common::*;
use kplace_abi::export::KernelImpl;
use kplace_abi::{Dtype, Tile};
use kplace_cpu::{DopplerFft, RangeFft};
use kplace_fftw::Complex32;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

/// The bound on max abs error / max abs value (f32 FFTs against an f64 oracle).
const REL_BOUND: f64 = 1e-5;

fn hann64(len: usize) -> Vec<f64> {
    if len == 1 {
        return vec![1.0];
    }
    (0..len)
        .map(|i| 0.5 * (1.0 - (2.0 * PI * i as f64 / (len - 1) as f64).cos()))
        .collect()
}

/// Returns the relative error of `got` against `want` (max abs error / max abs value).
fn relative_error(got: impl Iterator<Item = f64>, want: impl Iterator<Item = f64>) -> f64 {
    let (mut err, mut max) = (0f64, 0f64);
    for (g, w) in got.zip(want) {
        err = err.max((g - w).abs());
        max = max.max(w.abs());
    }
    err / max
}

struct RangeCase {
    setup: Setup,
    input: Buf,
    chirps: usize,
    samples: usize,
}

fn range_case(
    samples: usize,
    chirps: usize,
    seed: u64,
    params: &[(&str, &str)],
    tile: Option<u64>,
) -> RangeCase {
    let input_desc = desc(Dtype::CI16, &[chirps as u64, samples as u64]);
    let output_desc = desc(Dtype::CF32, &[samples as u64, chirps as u64]);
    let setup = Setup::split(params, &[input_desc], &[output_desc], tile.map(|t| (0, t)));
    let mut input = Buf::for_desc(&input_desc);
    let mut rng = StdRng::seed_from_u64(seed);
    for x in input.slice_mut::<i16>() {
        *x = rng.random();
    }
    RangeCase {
        setup,
        input,
        chirps,
        samples,
    }
}

/// The range FFT of every chirp in f64, as `[bin][chirp]`.
fn range_oracle(case: &RangeCase) -> Vec<Complex64> {
    let (n, m) = (case.samples, case.chirps);
    let fft = FftPlanner::<f64>::new().plan_fft_forward(n);
    let w = hann64(n);
    let iq = case.input.slice::<i16>();
    let mut out = vec![Complex64::default(); n * m];
    let mut row = vec![Complex64::default(); n];
    for c in 0..m {
        for (i, x) in row.iter_mut().enumerate() {
            *x = Complex64::new(
                f64::from(iq[2 * (c * n + i)]) * w[i],
                f64::from(iq[2 * (c * n + i) + 1]) * w[i],
            );
        }
        fft.process(&mut row);
        for (k, x) in row.iter().enumerate() {
            out[k * m + c] = *x;
        }
    }
    out
}

fn complex_error(got: &[Complex32], want: &[Complex64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let (mut err, mut max) = (0f64, 0f64);
    for (g, w) in got.iter().zip(want) {
        err = err.max((Complex64::new(f64::from(g.re), f64::from(g.im)) - w).norm());
        max = max.max(w.norm());
    }
    err / max
}

fn run_range(case: &RangeCase) -> Buf {
    let kernel: RangeFft = case.setup.create().expect("create");
    let output = Buf::for_desc(&case.setup.output(0));
    launch(
        &kernel,
        (case.setup.input(0), &case.input),
        (case.setup.output(0), &output),
        whole(case.chirps as u64),
    )
    .expect("launch");
    output
}

#[test]
fn range_fft_matches_f64_oracle_for_every_chirp_length() {
    for (i, samples) in [128, 256, 512, 1024, 2048, 4096].into_iter().enumerate() {
        let case = range_case(samples, 16, i as u64, &[], None);
        let out = run_range(&case);
        let err = complex_error(out.slice::<Complex32>(), &range_oracle(&case));
        assert!(err <= REL_BOUND, "N = {samples}: relative error {err:e}");
    }
}

#[test]
fn range_fft_matches_f64_oracle_for_every_chirp_count() {
    for (i, chirps) in [16, 32, 64, 128, 256, 512].into_iter().enumerate() {
        let case = range_case(128, chirps, 100 + i as u64, &[], None);
        let out = run_range(&case);
        let err = complex_error(out.slice::<Complex32>(), &range_oracle(&case));
        assert!(err <= REL_BOUND, "M = {chirps}: relative error {err:e}");
    }
}

#[test]
fn range_fft_handles_sizes_that_are_not_powers_of_two() {
    for (samples, chirps) in [(1000, 24), (100, 7), (3, 5)] {
        let case = range_case(
            samples,
            chirps,
            samples as u64,
            &[("planner", "estimate")],
            None,
        );
        let out = run_range(&case);
        let err = complex_error(out.slice::<Complex32>(), &range_oracle(&case));
        assert!(
            err <= REL_BOUND,
            "{samples} x {chirps}: relative error {err:e}"
        );
    }
}

/// Launches every tile of a split range FFT in a shuffled order, spread over two threads
/// running concurrently, each with its own workspace.
fn run_tiled(case: &RangeCase, tile: u64, seed: u64) -> (Buf, usize) {
    let kernel: RangeFft = case.setup.create().expect("create");
    let output = Buf::for_desc(&case.setup.output(0));
    let mut tiles: Vec<Tile> = (0..case.chirps as u64 / tile)
        .map(|t| Tile {
            begin: t * tile,
            count: tile,
        })
        .collect();
    tiles.shuffle(&mut StdRng::seed_from_u64(seed));
    let (first, second) = tiles.split_at(tiles.len() / 2);
    let (input_desc, output_desc) = (case.setup.input(0), case.setup.output(0));
    std::thread::scope(|scope| {
        for share in [first, second] {
            let (kernel, input, output) = (&kernel, &case.input, &output);
            scope.spawn(move || {
                let workspace = Buf::new(kernel.workspace_bytes() as usize);
                for &t in share {
                    launch_with(
                        kernel,
                        (input_desc, input),
                        (output_desc, output),
                        t,
                        &workspace,
                    )
                    .expect("tile launch");
                }
            });
        }
    });
    (output, kernel.chunk())
}

#[test]
fn tiled_range_fft_equals_untiled_from_two_threads_in_any_order() {
    let params = [("planner", "estimate")];
    let whole_case = range_case(1024, 128, 7, &params, None);
    let untiled_kernel: RangeFft = whole_case.setup.create().expect("create");
    let untiled = run_range(&whole_case);
    for tile in [16u64, 8, 32, 128] {
        let case = range_case(1024, 128, 7, &params, Some(tile));
        let (tiled, chunk) = run_tiled(&case, tile, tile);
        let (a, b) = (tiled.slice::<Complex32>(), untiled.slice::<Complex32>());
        if chunk == untiled_kernel.chunk() {
            // The same plan shape (and, with `estimate`, the same plan): the same bits.
            assert!(a == b, "tile {tile}: tiled output differs from untiled");
        } else {
            let want: Vec<Complex64> = b
                .iter()
                .map(|x| Complex64::new(x.re.into(), x.im.into()))
                .collect();
            let err = complex_error(a, &want);
            assert!(err <= 1e-6, "tile {tile}: relative difference {err:e}");
        }
    }
}

#[test]
fn tiled_range_fft_is_correct_with_the_measured_planner() {
    let case = range_case(2048, 64, 11, &[], Some(8));
    let (out, _) = run_tiled(&case, 8, 3);
    let err = complex_error(out.slice::<Complex32>(), &range_oracle(&case));
    assert!(err <= REL_BOUND, "relative error {err:e}");
}

#[test]
fn range_fft_streams_large_outputs_correctly_untiled_and_tiled() {
    // 4096 x 256 complex values are 8 MiB: the corner turn writes with streaming stores.
    let params = [("planner", "estimate")];
    let case = range_case(4096, 256, 21, &params, None);
    let want = range_oracle(&case);
    let err = complex_error(run_range(&case).slice::<Complex32>(), &want);
    assert!(err <= REL_BOUND, "untiled: relative error {err:e}");
    let case = range_case(4096, 256, 21, &params, Some(32));
    let (tiled, _) = run_tiled(&case, 32, 5);
    let err = complex_error(tiled.slice::<Complex32>(), &want);
    assert!(err <= REL_BOUND, "tiled: relative error {err:e}");
}

#[test]
fn range_fft_rejects_bad_configurations() {
    let i = desc(Dtype::CI16, &[128, 1024]);
    let o = desc(Dtype::CF32, &[1024, 128]);
    let create = |setup: Setup| setup.create::<RangeFft>().map(|_| ());
    assert_error(
        create(Setup::new(&[("window", "hann")], &[i], &[o])),
        &["unknown parameter window", "planner"],
    );
    assert_error(
        create(Setup::new(&[("planner", "fast")], &[i], &[o])),
        &["planner", "fast"],
    );
    assert_error(
        create(Setup::new(&[], &[desc(Dtype::CF32, &[128, 1024])], &[o])),
        &["input 0", "ci16"],
    );
    assert_error(
        create(Setup::new(&[], &[i], &[desc(Dtype::CF32, &[128, 1024])])),
        &["output 0", "[1024, 128]"],
    );
    assert_error(
        create(Setup::new(&[], &[desc(Dtype::CI16, &[128 * 1024])], &[o])),
        &["input 0", "[chirps, samples]"],
    );
    assert_error(
        create(Setup::split(&[], &[i], &[o], Some((1, 64)))),
        &["axis 0", "not axis 1"],
    );
    assert_error(
        create(Setup::split(&[], &[i], &[o], Some((0, 48)))),
        &["48", "does not divide"],
    );
    assert_error(create(Setup::new(&[], &[], &[o])), &["input 0 is missing"]);

    // A launch outside the frame, or with a tensor unlike the one created, fails cleanly.
    let setup = Setup::split(&[("planner", "estimate")], &[i], &[o], Some((0, 16)));
    let kernel: RangeFft = setup.create().expect("create");
    let (input, output) = (Buf::for_desc(&i), Buf::for_desc(&o));
    assert_error(
        launch(
            &kernel,
            (i, &input),
            (o, &output),
            Tile {
                begin: 120,
                count: 16,
            },
        ),
        &["tile"],
    );
    let small = desc(Dtype::CI16, &[64, 1024]);
    assert_error(
        launch(
            &kernel,
            (small, &input),
            (o, &output),
            Tile {
                begin: 0,
                count: 16,
            },
        ),
        &["input 0", "launched as"],
    );
}

struct DopplerCase {
    setup: Setup,
    input: Buf,
    rows: usize,
    chirps: usize,
}

fn doppler_case(rows: usize, chirps: usize, seed: u64, params: &[(&str, &str)]) -> DopplerCase {
    let input_desc = desc(Dtype::CF32, &[rows as u64, chirps as u64]);
    let output_desc = desc(Dtype::F32, &[rows as u64, chirps as u64]);
    let setup = Setup::new(params, &[input_desc], &[output_desc]);
    let mut input = Buf::for_desc(&input_desc);
    let mut rng = StdRng::seed_from_u64(seed);
    for x in input.slice_mut::<f32>() {
        *x = rng.random_range(-1e4..1e4);
    }
    DopplerCase {
        setup,
        input,
        rows,
        chirps,
    }
}

fn doppler_oracle(case: &DopplerCase) -> Vec<f64> {
    let (n, m) = (case.rows, case.chirps);
    let fft = FftPlanner::<f64>::new().plan_fft_forward(m);
    let w = hann64(m);
    let map = case.input.slice::<f32>();
    let mut out = Vec::with_capacity(n * m);
    let mut row = vec![Complex64::default(); m];
    for k in 0..n {
        for (d, x) in row.iter_mut().enumerate() {
            let at = 2 * (k * m + d);
            *x = Complex64::new(f64::from(map[at]) * w[d], f64::from(map[at + 1]) * w[d]);
        }
        fft.process(&mut row);
        out.extend(row.iter().map(|x| x.norm_sqr()));
    }
    out
}

fn run_doppler(case: &DopplerCase) -> Buf {
    let kernel: DopplerFft = case.setup.create().expect("create");
    let output = Buf::for_desc(&case.setup.output(0));
    launch(
        &kernel,
        (case.setup.input(0), &case.input),
        (case.setup.output(0), &output),
        whole(case.rows as u64),
    )
    .expect("launch");
    output
}

#[test]
fn doppler_fft_matches_f64_oracle_for_every_chirp_count() {
    // 100 rows: never a multiple of the block, so the tail plan runs too.
    for (i, chirps) in [16, 32, 64, 128, 256, 512].into_iter().enumerate() {
        let case = doppler_case(100, chirps, 200 + i as u64, &[]);
        let out = run_doppler(&case);
        let want = doppler_oracle(&case);
        let err = relative_error(
            out.slice::<f32>().iter().map(|&x| f64::from(x)),
            want.into_iter(),
        );
        assert!(err <= REL_BOUND, "M = {chirps}: relative error {err:e}");
    }
}

#[test]
fn doppler_fft_matches_f64_oracle_for_large_maps_and_odd_sizes() {
    for (rows, chirps, planner) in [
        (1024, 128, "measure"),
        (4096, 16, "measure"),
        (4096, 512, "estimate"),
        (33, 24, "estimate"),
        (5, 1, "estimate"),
    ] {
        let case = doppler_case(
            rows,
            chirps,
            (rows * chirps) as u64,
            &[("planner", planner)],
        );
        let out = run_doppler(&case);
        let want = doppler_oracle(&case);
        let err = relative_error(
            out.slice::<f32>().iter().map(|&x| f64::from(x)),
            want.into_iter(),
        );
        assert!(
            err <= REL_BOUND,
            "{rows} x {chirps}: relative error {err:e}"
        );
    }
}

#[test]
fn doppler_fft_rejects_bad_configurations() {
    let i = desc(Dtype::CF32, &[1024, 128]);
    let o = desc(Dtype::F32, &[1024, 128]);
    let create = |setup: Setup| setup.create::<DopplerFft>().map(|_| ());
    assert_error(
        create(Setup::new(&[("guard", "2")], &[i], &[o])),
        &["unknown parameter guard"],
    );
    assert_error(
        create(Setup::new(&[], &[desc(Dtype::F32, &[1024, 128])], &[o])),
        &["input 0", "cf32"],
    );
    assert_error(
        create(Setup::new(&[], &[i], &[desc(Dtype::F32, &[128, 1024])])),
        &["output 0", "[1024, 128]"],
    );
    assert_error(
        create(Setup::split(&[], &[i], &[o], Some((0, 64)))),
        &["cannot be split"],
    );
    let mut device = i;
    device.memory = kplace_abi::MemorySpace::DEVICE;
    assert_error(
        create(Setup::new(&[], &[device], &[o])),
        &["input 0", "host memory"],
    );
}
