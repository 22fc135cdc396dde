//! The CFAR kernel against two independent implementations written here:
//!
//! - a straightforward f64 one (direct sum over the training cells, `p > alpha * sum / K`),
//!   which any correct CA-CFAR agrees with except within rounding of a threshold; the maps
//!   used here have no cell that close, so the lists must be identical;
//! - the exact contract of the module docs (fixed-point training sums in u128, `S as f64`,
//!   one multiply), which must agree on EVERY map, ties and extreme values included.

mod common;

use common::*;
use kplace_abi::export::KernelImpl;
use kplace_abi::{Dtype, RecordListHeader};
use kplace_cpu::Cfar;
use kplace_cpu::cfar::fixed_point;
use kplace_kernels::Detection;
use kplace_kernels::cfar::training_cells;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A power map `[rows][cols]`.
struct Map {
    rows: usize,
    cols: usize,
    cells: Vec<f32>,
}

impl Map {
    fn at(&self, r: isize, d: isize) -> f32 {
        let r = r.rem_euclid(self.rows as isize) as usize;
        let d = d.rem_euclid(self.cols as isize) as usize;
        self.cells[r * self.cols + d]
    }

    /// Calls `f` with each training cell's power around (r, d).
    fn training(&self, r: usize, d: usize, guard: usize, train: usize, mut f: impl FnMut(f32)) {
        let h = (guard + train) as isize;
        for i in -h..=h {
            for j in -h..=h {
                if i.abs().max(j.abs()) > guard as isize {
                    f(self.at(r as isize + i, d as isize + j));
                }
            }
        }
    }

    fn exponential(rows: usize, cols: usize, mean: f64, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let cells = (0..rows * cols)
            .map(|_| (-(1.0 - rng.random::<f64>()).ln() * mean) as f32)
            .collect();
        Self { rows, cols, cells }
    }

    fn flat(rows: usize, cols: usize, value: f32) -> Self {
        Self {
            rows,
            cols,
            cells: vec![value; rows * cols],
        }
    }

    fn set(&mut self, r: usize, d: usize, p: f32) {
        self.cells[r * self.cols + d] = p;
    }
}

fn alpha_of(pfa: f64, k: f64) -> f64 {
    k * (pfa.powf(-1.0 / k) - 1.0)
}

/// The textbook CA-CFAR in f64.
fn reference_f64(map: &Map, guard: usize, train: usize, alpha: f64) -> Vec<Detection> {
    let side = |x: usize| ((2 * x + 1) * (2 * x + 1)) as f64;
    let k = side(guard + train) - side(guard);
    let mut out = Vec::new();
    for r in 0..map.rows {
        for d in 0..map.cols {
            let mut sum = 0f64;
            map.training(r, d, guard, train, |p| sum += f64::from(p));
            let p = map.at(r as isize, d as isize);
            if f64::from(p) > alpha * sum / k {
                out.push(Detection {
                    range_bin: r as u32,
                    doppler_bin: d as u32,
                    power: p,
                });
            }
        }
    }
    out
}

/// q(p) by the definition, through f64 (exact for f32 inputs).
fn q(p: f32) -> u128 {
    if p.is_nan() || p < 0.0 {
        0
    } else if f64::from(p) >= 2f64.powi(78) {
        1 << 86
    } else {
        (f64::from(p) * 2f64.powi(8)).floor() as u128
    }
}

/// The exact contract: u128 training sums, `(p as f64) > (S as f64) * scale`.
fn reference_exact(map: &Map, guard: usize, train: usize, alpha: f64) -> Vec<Detection> {
    let side = |x: usize| ((2 * x + 1) * (2 * x + 1)) as u64;
    let k = side(guard + train) - side(guard);
    let scale = alpha / k as f64 / 2f64.powi(8);
    let mut out = Vec::new();
    for r in 0..map.rows {
        for d in 0..map.cols {
            let mut sum = 0u128;
            map.training(r, d, guard, train, |p| sum += q(p));
            let p = map.at(r as isize, d as isize);
            if f64::from(p) > (sum as f64) * scale {
                out.push(Detection {
                    range_bin: r as u32,
                    doppler_bin: d as u32,
                    power: p,
                });
            }
        }
    }
    out
}

/// Which compiled copy of the kernel to run.
#[derive(Clone, Copy)]
enum Variant {
    Detected,
    Avx2,
    Portable,
}

/// Runs the kernel; returns the list's header and records.
fn run(
    map: &Map,
    params: &[(&str, &str)],
    capacity: u64,
    copy: Variant,
) -> (RecordListHeader, Vec<Detection>) {
    let input_desc = desc(Dtype::F32, &[map.rows as u64, map.cols as u64]);
    let output_desc = desc(Dtype::RECORDS, &[capacity]);
    let setup = Setup::new(params, &[input_desc], &[output_desc]);
    let kernel: Cfar = setup.create().expect("create");
    let kernel = match copy {
        Variant::Detected => kernel,
        Variant::Avx2 => kernel.avx2(),
        Variant::Portable => kernel.portable(),
    };
    let mut input = Buf::for_desc(&input_desc);
    input.slice_mut::<f32>().copy_from_slice(&map.cells);
    let output = Buf::for_desc(&output_desc);
    launch(
        &kernel,
        (input_desc, &input),
        (output_desc, &output),
        whole(map.rows as u64),
    )
    .expect("launch");
    let (header, records) = read_list(&output);
    assert_eq!(header.capacity as u64, capacity);
    assert_eq!(header.reserved, 0);
    (header, records)
}

/// Asserts two detection lists are identical, reporting the first difference briefly.
#[track_caller]
fn assert_same(got: &[Detection], want: &[Detection], what: &str) {
    if got != want {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: {} detections vs {} expected; first difference at {at}: {:?} vs {:?}",
            got.len(),
            want.len(),
            got.get(at),
            want.get(at)
        );
    }
}

/// Runs the kernel (every compiled copy) with room for everything and checks it against the
/// exact contract and, when `f64_too`, the f64 textbook version. Returns the detections.
fn check(
    map: &Map,
    guard: usize,
    train: usize,
    params: &[(&str, &str)],
    alpha: f64,
    f64_too: bool,
) -> Vec<Detection> {
    let capacity = (map.rows * map.cols) as u64;
    let (header, got) = run(map, params, capacity, Variant::Detected);
    assert_eq!(header.overflow, 0);
    for copy in [Variant::Avx2, Variant::Portable] {
        assert_same(
            &got,
            &run(map, params, capacity, copy).1,
            "the compiled copies disagree",
        );
    }
    assert_same(
        &got,
        &reference_exact(map, guard, train, alpha),
        "kernel against the exact contract",
    );
    if f64_too {
        assert_same(
            &got,
            &reference_f64(map, guard, train, alpha),
            "kernel against the f64 textbook CFAR",
        );
    }
    got
}

const K_DEFAULT: f64 = 416.0;

#[test]
fn fixed_point_follows_its_definition_on_every_kind_of_f32() {
    let mut rng = StdRng::seed_from_u64(1);
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        0.5,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let edges = [
        2f32.powi(78),
        2f32.powi(78).next_down(),
        2f32.powi(-32),
        2f32.powi(-33),
        2f32.powi(11),
        2f32.powi(10),
    ];
    for p in specials.into_iter().chain(edges) {
        assert_eq!(fixed_point(p), q(p), "q({p:e})");
    }
    for _ in 0..1_000_000 {
        let p = f32::from_bits(rng.random());
        assert_eq!(fixed_point(p), q(p), "q({p:e}) bits {:#x}", p.to_bits());
    }
    assert_eq!(fixed_point(-f32::NAN), 0);
    assert_eq!(training_cells(2, 8), 416);
}

#[test]
fn random_exponential_maps_match_both_references() {
    for (seed, (rows, cols)) in [(1024, 128), (256, 64), (37, 23), (64, 512)]
        .into_iter()
        .enumerate()
    {
        let map = Map::exponential(rows, cols, 3.0e7, seed as u64);
        for pfa in [1e-6, 1e-3, 1e-2] {
            let alpha = alpha_of(pfa, K_DEFAULT);
            let pfa_text = format!("{pfa:e}");
            let found = check(&map, 2, 8, &[("pfa", &pfa_text)], alpha, true);
            if pfa >= 1e-3 {
                assert!(
                    found.len() as f64 >= 0.2 * pfa * (rows * cols) as f64,
                    "{rows} x {cols} pfa {pfa}: too few detections"
                );
            }
        }
    }
}

#[test]
fn default_parameters_are_guard_2_train_8_pfa_1e_6() {
    let mut map = Map::exponential(128, 64, 1e6, 9);
    map.set(60, 30, 3e7);
    let found = check(&map, 2, 8, &[], alpha_of(1e-6, K_DEFAULT), true);
    assert!(
        found
            .iter()
            .any(|d| (d.range_bin, d.doppler_bin) == (60, 30))
    );
    let setup = Setup::new(
        &[],
        &[desc(Dtype::F32, &[128, 64])],
        &[desc(Dtype::RECORDS, &[16])],
    );
    let kernel: Cfar = setup.create().expect("create");
    assert_eq!(kernel.alpha(), alpha_of(1e-6, K_DEFAULT));
    assert_eq!(
        kernel.scale(),
        alpha_of(1e-6, K_DEFAULT) / 416.0 / 2f64.powi(8)
    );
}

#[test]
fn other_windows_match_both_references() {
    // (guard, train): the last two have windows of 25 and 27 cells a side, past the limit
    // of the fast conversion, so they exercise the u128 path.
    for (i, (guard, train)) in [(0, 1), (1, 3), (0, 12), (3, 9), (1, 12)]
        .into_iter()
        .enumerate()
    {
        let map = Map::exponential(96, 40, 5e3, 50 + i as u64);
        let k = training_cells(guard, train) as f64;
        let params = [
            ("guard", guard.to_string()),
            ("train", train.to_string()),
            ("pfa", "1e-2".to_string()),
        ];
        let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let found = check(
            &map,
            guard as usize,
            train as usize,
            &params,
            alpha_of(1e-2, k),
            true,
        );
        assert!(
            !found.is_empty(),
            "guard {guard} train {train}: nothing detected"
        );
    }
}

#[test]
fn a_window_exactly_as_large_as_the_map_works() {
    let map = Map::exponential(21, 21, 1e4, 3);
    check(&map, 2, 8, &[("scale", "1.5")], 1.5, true);
}

#[test]
fn flat_map_detects_exactly_the_hot_cells() {
    let mut map = Map::flat(512, 128, 1000.0);
    let hot = [(5, 7), (100, 64), (300, 3), (301, 120), (511, 64)];
    for &(r, d) in &hot {
        map.set(r, d, 1e6);
    }
    let found = check(&map, 2, 8, &[], alpha_of(1e-6, K_DEFAULT), true);
    let cells: Vec<(u32, u32)> = found.iter().map(|d| (d.range_bin, d.doppler_bin)).collect();
    assert_eq!(cells, hot.map(|(r, d)| (r as u32, d as u32)).to_vec());
}

#[test]
fn hot_cells_at_the_wrap_edges_see_the_other_side() {
    let (rows, cols) = (256, 64);
    let mut map = Map::flat(rows, cols, 200.0);
    let corners = [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)];
    for &(r, d) in &corners {
        map.set(r, d, 4e4);
    }
    // Moderately hot cells just across an edge from each other: their training windows
    // include the corner cells only through the wrap-around.
    map.set(1, cols - 2, 5e3);
    map.set(rows - 2, 1, 5e3);
    map.set(128, 0, 1e5);
    map.set(128, cols - 1, 1e5);
    let found = check(&map, 2, 8, &[], alpha_of(1e-6, K_DEFAULT), true);
    for (r, d) in corners.into_iter().chain([(128, 0), (128, cols - 1)]) {
        assert!(
            found
                .iter()
                .any(|x| (x.range_bin, x.doppler_bin) == (r as u32, d as u32)),
            "({r}, {d}) missed"
        );
    }

    // A cell that crosses its threshold only if the wrap is ignored: the hot cells sit just
    // across the edge, inside its training window only when the map wraps.
    let mut map = Map::flat(64, 64, 100.0);
    map.set(0, 5, 5_000.0);
    for d in 0..64 {
        map.set(60, d, 1e4);
    }
    let found = check(&map, 2, 8, &[], alpha_of(1e-6, K_DEFAULT), true);
    assert!(
        !found.iter().any(|x| (x.range_bin, x.doppler_bin) == (0, 5)),
        "wrap ignored at (0, 5)"
    );
}

#[test]
fn exact_ties_and_extreme_values_follow_the_contract() {
    // Flat maps with alpha = 1: every cell sits on its threshold, so the decision is decided
    // by the roundings the contract fixes. Values with and without fraction bits below 2^-32.
    for value in [1000.0f32, 0.1, 3.0e-9, 7.5e12, 1.0e17] {
        let map = Map::flat(64, 48, value);
        check(&map, 2, 8, &[("scale", "1")], 1.0, false);
        check(
            &map,
            2,
            8,
            &[("scale", "0.999999999999")],
            0.999999999999,
            false,
        );
    }
    // Random bit patterns: every exponent, subnormals, infinities, NaNs, negatives, and
    // powers beyond the saturation point.
    let mut rng = StdRng::seed_from_u64(77);
    let cells = (0..96 * 64).map(|_| f32::from_bits(rng.random())).collect();
    let map = Map {
        rows: 96,
        cols: 64,
        cells,
    };
    check(&map, 2, 8, &[("scale", "0.5")], 0.5, false);
    // Positive finite values spread over the whole range.
    let cells = (0..96 * 64)
        .map(|_| f32::from_bits(rng.random_range(0..0x7f80_0000u32)))
        .collect();
    let map = Map {
        rows: 96,
        cols: 64,
        cells,
    };
    check(&map, 2, 8, &[("scale", "2")], 2.0, false);
    check(
        &map,
        3,
        9,
        &[("scale", "2"), ("guard", "3"), ("train", "9")],
        2.0,
        false,
    );
    // Tiny windows (large caps on the bound values) on the same wide-range map.
    let tiny = [("scale", "2"), ("guard", "0"), ("train", "1")];
    check(&map, 0, 1, &tiny, 2.0, false);
    let tiny = [("scale", "0.5"), ("guard", "1"), ("train", "1")];
    check(&map, 1, 1, &tiny, 0.5, false);
}

#[test]
fn sparse_maps_and_both_tilings_match_both_references() {
    // Mostly zeros (the median power is 0) with scattered returns of every size.
    let mut rng = StdRng::seed_from_u64(31);
    for (rows, cols) in [(128, 64), (127, 64), (64, 45)] {
        let mut map = Map::flat(rows, cols, 0.0);
        for _ in 0..rows * cols / 20 {
            let (r, d) = (rng.random_range(0..rows), rng.random_range(0..cols));
            map.set(r, d, 10f32.powf(rng.random_range(-3.0..9.0)));
        }
        check(&map, 2, 8, &[], alpha_of(1e-6, K_DEFAULT), true);
        check(
            &map,
            2,
            8,
            &[("pfa", "1e-2")],
            alpha_of(1e-2, K_DEFAULT),
            true,
        );
    }
    // Even maps use 2x2 tiles; an odd dimension, or a window too small for whole training
    // tiles, falls back to single cells (both are checked against the references above and
    // in the other tests).
    let tiles = |rows: u64, cols: u64, params: &[(&str, &str)]| {
        let setup = Setup::new(
            params,
            &[desc(Dtype::F32, &[rows, cols])],
            &[desc(Dtype::RECORDS, &[8])],
        );
        setup.create::<Cfar>().expect("create").tile_side()
    };
    assert_eq!(tiles(128, 64, &[]), 2);
    assert_eq!(tiles(127, 64, &[]), 1);
    assert_eq!(tiles(64, 45, &[]), 1);
    assert_eq!(tiles(64, 64, &[("guard", "1"), ("train", "3")]), 1);
    assert_eq!(tiles(64, 64, &[("guard", "0"), ("train", "12")]), 2);
}

#[test]
fn strong_neighbours_never_hide_a_detection() {
    // A cell 50 times the floor beside one 40 times the floor: a kernel that over-estimated the
    // strong neighbour's share of the training sum (as a lower bound must never do) would miss
    // it, for small windows and large.
    for (guard, train) in [(0usize, 1usize), (1, 1), (2, 8)] {
        let mut map = Map::flat(64, 64, 1e6);
        map.set(10, 10, 4e7);
        map.set(10, 11, 5e7);
        let params = [
            ("scale", "2".to_string()),
            ("guard", guard.to_string()),
            ("train", train.to_string()),
        ];
        let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let found = check(&map, guard, train, &params, 2.0, true);
        assert!(
            found
                .iter()
                .any(|d| (d.range_bin, d.doppler_bin) == (10, 11)),
            "guard {guard} train {train}"
        );
    }
}

#[test]
fn overflow_keeps_the_first_detections_in_row_major_order() {
    let map = Map::exponential(128, 64, 1e3, 5);
    let all = reference_exact(&map, 2, 8, alpha_of(1e-2, K_DEFAULT));
    assert!(all.len() > 20, "need a long list, got {}", all.len());
    for capacity in [0usize, 1, 10, all.len() - 1, all.len(), all.len() + 5] {
        let (header, got) = run(&map, &[("pfa", "1e-2")], capacity as u64, Variant::Detected);
        let kept = capacity.min(all.len());
        assert_eq!(header.count as usize, kept);
        assert_eq!(header.overflow as usize, all.len() - kept);
        assert_same(&got, &all[..kept], "kept records");
    }
}

#[test]
fn bad_parameters_and_shapes_are_rejected_by_name() {
    let i = desc(Dtype::F32, &[128, 64]);
    let o = desc(Dtype::RECORDS, &[100]);
    let create =
        |params: &[(&str, &str)]| Setup::new(params, &[i], &[o]).create::<Cfar>().map(|_| ());
    assert_error(
        create(&[("gaurd", "2")]),
        &["unknown parameter gaurd", "guard, train, pfa, scale"],
    );
    assert_error(
        create(&[("pfa", "1e-6"), ("scale", "14")]),
        &["pfa", "scale", "at most one"],
    );
    assert_error(
        create(&[("train", "40")]),
        &["guard", "train", "85", "128 x 64"],
    );
    assert_error(
        create(&[("guard", "30"), ("train", "2")]),
        &["guard 30", "does not fit"],
    );
    assert_error(create(&[("train", "0")]), &["train"]);
    assert_error(create(&[("guard", "two")]), &["guard", "two"]);
    assert_error(create(&[("pfa", "1.5")]), &["pfa", "(0, 1)"]);
    assert_error(create(&[("pfa", "0")]), &["pfa"]);
    assert_error(create(&[("scale", "-1")]), &["scale", ">= 0"]);
    assert_error(create(&[("scale", "inf")]), &["scale"]);

    let make = |i, o| Setup::new(&[], &[i], &[o]).create::<Cfar>().map(|_| ());
    assert_error(make(desc(Dtype::CF32, &[128, 64]), o), &["input 0", "f32"]);
    assert_error(
        make(desc(Dtype::F32, &[128 * 64]), o),
        &["input 0", "[range bins, Doppler bins]"],
    );
    assert_error(make(i, desc(Dtype::F32, &[100])), &["output 0", "records"]);
    assert_error(
        make(desc(Dtype::F32, &[128, 16]), o),
        &["does not fit", "128 x 16"],
    );
    let split = Setup::split(&[], &[i], &[o], Some((0, 64)))
        .create::<Cfar>()
        .map(|_| ());
    assert_error(split, &["cannot be split"]);
}

#[test]
fn workspace_is_a_ring_of_rows_not_the_map() {
    let setup = Setup::new(
        &[],
        &[desc(Dtype::F32, &[4096, 512])],
        &[desc(Dtype::RECORDS, &[4096])],
    );
    let kernel: Cfar = setup.create().expect("create");
    // (a prefix row + 21 ring rows x 2 + 2 running sums) x 512 columns of u64, plus margins.
    assert!(
        kernel.workspace_bytes() < 200 * 1024,
        "{} bytes",
        kernel.workspace_bytes()
    );
}
