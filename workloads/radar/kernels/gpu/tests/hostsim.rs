//! The library's CUDA C and launch sequences, run on the host simulator (no GPU needed).
//!
//! - Each element-wise kernel against its definition, bit for bit; CFAR's block scan against
//!   plain prefix sums.
//! - The stand-in for cuFFT (rustfft) against a direct DFT in cuFFT's strided layout.
//! - Each FFT stage's whole launch sequence (tiles of 1, 8, 16 and 128 chirps and unsplit,
//!   workspace carving, grids, the range FFT's strided output) against a plain f64 model.
//! - CFAR's whole launch sequence against the CPU library (`kplace_cpu::Cfar`): identical
//!   lists (header and records) on scene maps, pure noise, extreme values, ties, other
//!   windows, odd shapes, maps without detections, and small capacities.
//!
//! A test suite: every GPU kernel run on the host through the simulator, case by case; the
//! cases share one set of helpers, so they stay in one file.

mod common;

use common::*;
use kplace_abi::export::KernelImpl;
use kplace_abi::{Dtype, RecordListHeader, Tile};
use kplace_cuda_hostsim::HostQueue;
use kplace_cudakit::fft_shape::{FftDirection, FftLayout, FftShape, FftStrides};
use kplace_cudakit::queue::{Grid, Queue, arg};
use kplace_gpu::cfar::CfarPlan;
use kplace_gpu::cfar::{CHUNK, SCAN_THREADS};
use kplace_gpu::doppler_fft::DopplerFftPlan;
use kplace_gpu::range_fft::RangeFftPlan;
use kplace_gpu::source::Function;
use kplace_kernels::Detection;
use kplace_kernels::window::hann;
use kplace_radar::scene::high_snr_targets;
use kplace_radar::{Cpi, Scene, SceneConfig, reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

#[test]
fn the_simulator_runs_exactly_the_library_s_kernels() {
    // Only the scan has barriers: the others run thread after thread.
    kplace_cuda_hostsim::check_library::<Function>("kp_", |f| f == Function::CfarScan).unwrap();
}

fn random_iq(len: usize, seed: u64) -> Vec<[i16; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..len).map(|_| [rng.random(), rng.random()]).collect()
}

#[test]
fn range_window_converts_and_windows_exactly() {
    let (m, n) = (12usize, 48usize);
    let iq = random_iq(m * n, 1);
    let window = hann(n);
    let (first, count) = (4u32, 5u32);
    let input = Buf::from_slice(&iq);
    let w = Buf::from_slice(&window);
    let out = Buf::new(count as usize * n * 8);
    let (samples, total) = (n as u32, u64::from(count) * n as u64);
    let (iq_addr, w_addr, out_addr) = (input.addr(), w.addr(), out.addr());
    let queue = HostQueue::new();
    // SAFETY: arguments as the kernel declares them; every buffer is large enough.
    unsafe {
        queue.launch(
            Function::RangeWindow,
            Grid::linear(total, 64).unwrap(),
            &mut [
                arg(&iq_addr),
                arg(&w_addr),
                arg(&out_addr),
                arg(&samples),
                arg(&first),
                arg(&total),
            ],
        )
    }
    .unwrap();
    let got = out.slice::<[f32; 2]>();
    for j in 0..count as usize {
        for k in 0..n {
            let [i, q] = iq[(first as usize + j) * n + k];
            let want = [f32::from(i) * window[k], f32::from(q) * window[k]];
            assert_eq!(
                got[j * n + k].map(f32::to_bits),
                want.map(f32::to_bits),
                "chirp {j} sample {k}"
            );
        }
    }
}

#[test]
fn the_host_fft_follows_cuffts_strided_layout() {
    // Point x of transform b at input element b * 13 + 2x; bin k at output element b + 4k:
    // three transforms interleaved in an output with room for four, the fourth untouched.
    let (len, batch) = (6usize, 3usize);
    let (from, to) = (
        FftStrides {
            stride: 2,
            dist: 13,
        },
        FftStrides { stride: 4, dist: 1 },
    );
    let shape = FftShape {
        direction: FftDirection::Forward,
        len,
        batch,
        layout: FftLayout::OutOfPlace {
            input: from,
            output: to,
        },
    };
    assert_eq!((from.span(len, batch), to.span(len, batch)), (37, 23));
    let input: Vec<[f32; 2]> = (0..37).map(|i| [i as f32, (i * i % 7) as f32]).collect();
    let input = Buf::from_slice(&input);
    let mut output = Buf::new(24 * 8);
    output.slice_mut::<[f32; 2]>().fill([9.0, 9.0]);
    // SAFETY: both buffers hold their layouts' spans and do not overlap.
    unsafe { Queue::<Function>::fft(&HostQueue::new(), shape, input.addr(), output.addr(), 0) }
        .unwrap();
    let (x, y) = (input.slice::<[f32; 2]>(), output.slice::<[f32; 2]>());
    for (at, value) in y.iter().enumerate() {
        let (b, k) = (at % 4, at / 4);
        if b >= batch {
            assert_eq!(*value, [9.0, 9.0], "element {at} is outside the layout");
            continue;
        }
        let want: Complex64 = (0..len)
            .map(|n| {
                let [re, im] = x[from.at(b, n)];
                let turn = -2.0 * std::f64::consts::PI * (n * k) as f64 / len as f64;
                Complex64::new(f64::from(re), f64::from(im)) * Complex64::from_polar(1.0, turn)
            })
            .sum();
        let got = Complex64::new(f64::from(value[0]), f64::from(value[1]));
        assert!((got - want).norm() < 1e-4, "transform {b} bin {k}");
    }
}

#[test]
fn the_scan_kernel_writes_exclusive_prefix_sums_and_the_header() {
    let threads = SCAN_THREADS as usize;
    let mut rng = StdRng::seed_from_u64(21);
    for chunks in [
        1usize,
        5,
        threads - 1,
        threads,
        threads + 1,
        3 * threads + 7,
    ] {
        for capacity in [0u32, 100, u32::MAX] {
            let counts: Vec<u32> = (0..chunks).map(|_| rng.random_range(0..=CHUNK)).collect();
            let counts_buf = Buf::from_slice(&counts);
            let mut offsets = Buf::new(chunks * 4);
            offsets.slice_mut::<u32>().fill(0xdead_beef);
            let mut list = Buf::new(16);
            list.slice_mut::<u32>().fill(0xdead_beef);
            let (c, o, l, n) = (
                counts_buf.addr(),
                offsets.addr(),
                list.addr(),
                chunks as u32,
            );
            // SAFETY: arguments as the kernel declares them; every buffer is large enough.
            unsafe {
                HostQueue::new().launch(
                    Function::CfarScan,
                    Grid::linear(u64::from(SCAN_THREADS), SCAN_THREADS).unwrap(),
                    &mut [arg(&c), arg(&o), arg(&n), arg(&l), arg(&capacity)],
                )
            }
            .unwrap();
            let want: Vec<u32> = counts
                .iter()
                .scan(0u32, |total, &c| {
                    let at = *total;
                    *total += c;
                    Some(at)
                })
                .collect();
            assert_eq!(offsets.slice::<u32>(), &want[..], "{chunks} chunks");
            let total: u32 = counts.iter().sum();
            let count = total.min(capacity);
            assert_eq!(
                list.slice::<u32>(),
                &[count, capacity, total - count, 0],
                "{chunks} chunks, capacity {capacity}"
            );
        }
    }
}

#[test]
fn power_is_rounded_operation_by_operation() {
    let mut rng = StdRng::seed_from_u64(3);
    let spectrum: Vec<[f32; 2]> = (0..1000)
        .map(|_| {
            [
                f32::from_bits(rng.random_range(0..0x7f00_0000))
                    * if rng.random() { 1.0 } else { -1.0 },
                rng.random_range(-1e6f32..1e6),
            ]
        })
        .collect();
    let input = Buf::from_slice(&spectrum);
    let out = Buf::new(spectrum.len() * 4);
    let (i, o, total) = (input.addr(), out.addr(), spectrum.len() as u64);
    let queue = HostQueue::new();
    // SAFETY: arguments as the kernel declares them; every buffer is large enough.
    unsafe {
        queue.launch(
            Function::Power,
            Grid::linear(total, 256).unwrap(),
            &mut [arg(&i), arg(&o), arg(&total)],
        )
    }
    .unwrap();
    for (p, [re, im]) in out.slice::<f32>().iter().zip(&spectrum) {
        assert_eq!(p.to_bits(), (re * re + im * im).to_bits());
    }
}

/// The range stage in f64: window (the f32 coefficients), FFT, range-major.
fn range_model(iq: &[[i16; 2]], m: usize, n: usize) -> Vec<Complex64> {
    let window = hann(n);
    let mut chirps: Vec<Complex64> = iq
        .iter()
        .enumerate()
        .map(|(i, &[re, im])| {
            let w = f64::from(window[i % n]);
            Complex64::new(f64::from(re) * w, f64::from(im) * w)
        })
        .collect();
    FftPlanner::<f64>::new()
        .plan_fft_forward(n)
        .process(&mut chirps);
    (0..n * m).map(|i| chirps[(i % m) * n + i / m]).collect()
}

/// Runs the range plan over `tiles` (in the given order) on the host simulator, into an
/// output that holds `sentinel` everywhere before.
fn run_range_over(
    iq: &[[i16; 2]],
    m: u64,
    n: u64,
    tile: Option<u64>,
    order: &[u64],
    sentinel: [f32; 2],
) -> Buf {
    let (i, o) = (desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[n, m]));
    let setup = Setup::split(&[], &[i], &[o], tile.map(|t| (0, t)));
    let plan = RangeFftPlan::from_config(&setup.config()).expect("plan");
    let fft_work = 1000;
    let layout = plan.layout(fft_work);
    let input = Buf::from_slice(iq);
    let mut output = Buf::for_desc(&o);
    output.slice_mut::<[f32; 2]>().fill(sentinel);
    let window = Buf::from_slice(&hann(n as usize));
    let queue = HostQueue::new();
    for &t in order {
        let workspace = Buf::new(layout.bytes() as usize);
        let tile = match tile {
            Some(size) => Tile {
                begin: t * size,
                count: size,
            },
            None => whole(m),
        };
        // SAFETY: buffers sized from the descriptors and the plan's layout.
        unsafe {
            plan.enqueue(
                &queue,
                input.addr(),
                output.addr(),
                window.addr(),
                workspace.addr(),
                layout.bytes(),
                fft_work,
                tile,
            )
        }
        .expect("enqueue");
    }
    output
}

/// Runs the range plan over `tiles` (in the given order) on the host simulator.
fn run_range(iq: &[[i16; 2]], m: u64, n: u64, tile: Option<u64>, order: &[u64]) -> Buf {
    run_range_over(iq, m, n, tile, order, [0.0, 0.0])
}

#[test]
fn range_stage_matches_an_f64_model_tiled_and_whole() {
    for (m, n, tile) in [
        (64u64, 256u64, Some(16u64)),
        (48, 100, Some(8)),
        (16, 64, Some(1)),
        (256, 64, Some(128)),
        (512, 32, Some(128)),
        (32, 128, None),
        (128, 96, None),
    ] {
        let iq = random_iq((m * n) as usize, m + n);
        let want = range_model(&iq, m as usize, n as usize);
        let order: Vec<u64> = match tile {
            // Tiles out of order, as packets may complete them.
            Some(t) => (0..m / t).rev().collect(),
            None => vec![0],
        };
        let out = run_range(&iq, m, n, tile, &order);
        let got = out.slice::<[f32; 2]>();
        assert_within_peak(
            parts(got),
            want.iter().flat_map(|c| [c.re, c.im]),
            format_args!("{m}x{n} tile {tile:?}"),
        );
    }
}

#[test]
fn a_range_tile_writes_exactly_its_columns() {
    // One tile of each size alone: its columns are the model's, every other still the
    // sentinel (the strided FFT output touches nothing outside its layout).
    let (m, n) = (256u64, 48u64);
    let iq = random_iq((m * n) as usize, 9);
    let want = range_model(&iq, m as usize, n as usize);
    let sentinel = [f32::from_bits(0x7fc0_1234), -7.0];
    for (tile, index) in [(1u64, 0u64), (1, 255), (16, 5), (128, 1), (64, 0)] {
        let out = run_range_over(&iq, m, n, Some(tile), &[index], sentinel);
        let got = out.slice::<[f32; 2]>();
        let columns = index * tile..(index + 1) * tile;
        let mut peak = 0f64;
        let mut err = 0f64;
        for k in 0..n {
            for c in 0..m {
                let at = (k * m + c) as usize;
                if columns.contains(&c) {
                    let w = want[at];
                    peak = peak.max(w.re.abs()).max(w.im.abs());
                    err = err
                        .max((f64::from(got[at][0]) - w.re).abs())
                        .max((f64::from(got[at][1]) - w.im).abs());
                } else {
                    assert_eq!(
                        got[at].map(f32::to_bits),
                        sentinel.map(f32::to_bits),
                        "tile {tile} #{index}: bin {k} chirp {c} outside the tile"
                    );
                }
            }
        }
        assert!(
            err / peak < 1e-5,
            "tile {tile} #{index}: error {:.2e}",
            err / peak
        );
    }
}

#[test]
fn range_tiles_must_be_whole_tiles_in_the_frame() {
    let (i, o) = (desc(Dtype::CI16, &[64, 32]), desc(Dtype::CF32, &[32, 64]));
    let setup = Setup::split(&[], &[i], &[o], Some((0, 16)));
    let plan = RangeFftPlan::from_config(&setup.config()).unwrap();
    assert_eq!(
        plan.chirps_of(Tile {
            begin: 16,
            count: 32
        })
        .unwrap(),
        (16, 32)
    );
    for (begin, count) in [(60, 16), (0, 8), (0, 0), (u64::MAX, 16)] {
        assert!(
            plan.chirps_of(Tile { begin, count }).is_err(),
            "[{begin}, +{count})"
        );
    }
}

#[test]
fn doppler_stage_matches_an_f64_model() {
    for (n, m) in [(64u64, 128u64), (30, 24)] {
        let mut rng = StdRng::seed_from_u64(n * m);
        let map: Vec<[f32; 2]> = (0..n * m)
            .map(|_| [rng.random_range(-1e5..1e5), rng.random_range(-1e5..1e5)])
            .collect();
        let window = hann(m as usize);
        let mut rows: Vec<Complex64> = map
            .iter()
            .enumerate()
            .map(|(i, &[re, im])| {
                let w = f64::from(window[i % m as usize]);
                Complex64::new(f64::from(re) * w, f64::from(im) * w)
            })
            .collect();
        FftPlanner::<f64>::new()
            .plan_fft_forward(m as usize)
            .process(&mut rows);
        let want: Vec<f64> = rows.iter().map(|c| c.norm_sqr()).collect();

        let (i, o) = (desc(Dtype::CF32, &[n, m]), desc(Dtype::F32, &[n, m]));
        let setup = Setup::new(&[("planner", "measure")], &[i], &[o]);
        let plan = DopplerFftPlan::from_config(&setup.config()).expect("plan");
        let layout = plan.layout(64);
        let (input, output) = (Buf::from_slice(&map), Buf::for_desc(&o));
        let (w, workspace) = (Buf::from_slice(&window), Buf::new(layout.bytes() as usize));
        // SAFETY: buffers sized from the descriptors and the plan's layout.
        unsafe {
            plan.enqueue(
                &HostQueue::new(),
                input.addr(),
                output.addr(),
                w.addr(),
                workspace.addr(),
                layout.bytes(),
                64,
            )
        }
        .expect("enqueue");
        assert_within_peak(
            output.slice::<f32>().iter().map(|&p| f64::from(p)),
            want.iter().copied(),
            format_args!("{n}x{m}"),
        );
        // The input is the previous stage's: it must be left as it was.
        assert_eq!(input.slice::<[f32; 2]>(), &map[..]);
    }
}

/// A power map through the library's two FFT plans on the host simulator (range tiled by 16).
fn gpu_power_map(iq: &[[i16; 2]], cpi: Cpi) -> Vec<f32> {
    let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
    let range = run_range(iq, m, n, Some(16), &(0..m / 16).collect::<Vec<_>>());
    let (i, o) = (desc(Dtype::CF32, &[n, m]), desc(Dtype::F32, &[n, m]));
    let setup = Setup::new(&[], &[i], &[o]);
    let plan = DopplerFftPlan::from_config(&setup.config()).expect("plan");
    let layout = plan.layout(0);
    let output = Buf::for_desc(&o);
    let (w, workspace) = (
        Buf::from_slice(&hann(m as usize)),
        Buf::new(layout.bytes() as usize),
    );
    // SAFETY: buffers sized from the descriptors and the plan's layout.
    unsafe {
        plan.enqueue(
            &HostQueue::new(),
            range.addr(),
            output.addr(),
            w.addr(),
            workspace.addr(),
            layout.bytes(),
            0,
        )
    }
    .expect("enqueue");
    output.slice::<f32>().to_vec()
}

/// A detection list: header and records.
type List = (RecordListHeader, Vec<Detection>);

/// CFAR through the GPU plan on the host simulator.
fn gpu_cfar(map: &[f32], rows: u64, cols: u64, params: &[(&str, &str)], capacity: u64) -> List {
    let (i, o) = (
        desc(Dtype::F32, &[rows, cols]),
        desc(Dtype::RECORDS, &[capacity]),
    );
    let setup = Setup::new(params, &[i], &[o]);
    let plan = CfarPlan::from_config(&setup.config()).expect("plan");
    let layout = plan.layout();
    let input = Buf::from_slice(map);
    let mut output = Buf::for_desc(&o);
    // Garbage where the kernel must write: the header and every record slot.
    output.slice_mut::<u8>().fill(0xA5);
    let workspace = Buf::new(layout.bytes() as usize);
    // SAFETY: buffers sized from the descriptors and the plan's layout.
    unsafe {
        plan.enqueue(
            &HostQueue::new(),
            input.addr(),
            output.addr(),
            workspace.addr(),
            layout.bytes(),
        )
    }
    .expect("enqueue");
    read_list(output.slice::<u8>())
}

/// CFAR through the CPU library.
fn cpu_cfar(map: &[f32], rows: u64, cols: u64, params: &[(&str, &str)], capacity: u64) -> List {
    let (i, o) = (
        host_desc(Dtype::F32, &[rows, cols]),
        host_desc(Dtype::RECORDS, &[capacity]),
    );
    let kernel: kplace_cpu::Cfar = Setup::new(params, &[i], &[o]).create().expect("create");
    let input = Buf::from_slice(map);
    let output = Buf::for_desc(&o);
    launch_cpu(&kernel, (i, &input), (o, &output), whole(rows)).expect("launch");
    read_list(output.slice::<u8>())
}

/// Asserts the GPU plan's list equals the CPU library's, bit for bit; returns it.
#[track_caller]
fn assert_same_as_cpu(
    map: &[f32],
    rows: u64,
    cols: u64,
    params: &[(&str, &str)],
    capacity: u64,
    what: &str,
) -> List {
    let gpu = gpu_cfar(map, rows, cols, params, capacity);
    let cpu = cpu_cfar(map, rows, cols, params, capacity);
    assert_eq!(gpu.0, cpu.0, "{what}: headers differ");
    let bits = |l: &[Detection]| -> Vec<(u32, u32, u32)> {
        l.iter()
            .map(|d| (d.range_bin, d.doppler_bin, d.power.to_bits()))
            .collect()
    };
    if bits(&gpu.1) != bits(&cpu.1) {
        let at = gpu.1.iter().zip(&cpu.1).position(|(a, b)| a != b);
        panic!(
            "{what}: {} vs {} detections; first difference at {at:?}",
            gpu.1.len(),
            cpu.1.len()
        );
    }
    assert_eq!(gpu.0.reserved, 0);
    gpu
}

fn check_scene(config: SceneConfig, frames: u64) {
    let cpi = config.cpi;
    let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
    let targets = config.targets.len();
    let scene = Scene::new(config).unwrap();
    let mut iq = vec![[0i16; 2]; cpi.cells()];
    for frame in 0..frames {
        scene.generate_frame(frame, &mut iq).unwrap();
        let got = gpu_power_map(&iq, cpi);
        let want = reference::range_doppler_power(&iq, cpi);
        assert_within_peak(
            got.iter().map(|&p| f64::from(p)),
            want.iter().copied(),
            format_args!("frame {frame}: power"),
        );
        let (header, detections) =
            assert_same_as_cpu(&got, n, m, &[], 16384, &format!("frame {frame}"));
        assert_eq!(header.overflow, 0);
        if targets > 0 {
            assert!(
                detections.len() >= targets,
                "frame {frame}: targets detected"
            );
        }
    }
}

#[test]
fn default_scene_through_the_gpu_pipeline() {
    check_scene(
        SceneConfig::new(Cpi {
            samples: 1024,
            chirps: 128,
        }),
        2,
    );
}

#[test]
fn high_snr_scene_through_the_gpu_pipeline() {
    let mut config = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    config.targets = high_snr_targets();
    check_scene(config, 2);
}

#[test]
fn larger_high_snr_scene_through_the_gpu_pipeline() {
    let mut config = SceneConfig::new(Cpi {
        samples: 2048,
        chirps: 256,
    });
    config.targets = high_snr_targets();
    config.seed = 5;
    check_scene(config, 1);
}

#[test]
fn pure_noise_through_the_gpu_pipeline() {
    let mut config = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    config.targets.clear();
    config.seed = 11;
    check_scene(config, 2);
}

#[test]
fn cfar_on_extreme_values_matches_the_cpu_library() {
    let (rows, cols) = (96u64, 64u64);
    let mut rng = StdRng::seed_from_u64(77);
    // Every bit pattern: NaNs, infinities, negatives, -0, subnormals, saturating powers.
    let random_bits: Vec<f32> = (0..rows * cols)
        .map(|_| f32::from_bits(rng.random()))
        .collect();
    for scale in ["0.5", "2", "0"] {
        assert_same_as_cpu(
            &random_bits,
            rows,
            cols,
            &[("scale", scale)],
            8192,
            "random bits",
        );
    }
    // Positive finite values over the whole range, with small windows too.
    let finite: Vec<f32> = (0..rows * cols)
        .map(|_| f32::from_bits(rng.random_range(0..0x7f80_0000u32)))
        .collect();
    for params in [
        &[("scale", "2")][..],
        &[("scale", "2"), ("guard", "3"), ("train", "9")],
        &[("scale", "2"), ("guard", "0"), ("train", "1")],
        &[("scale", "0.5"), ("guard", "1"), ("train", "1")],
    ] {
        assert_same_as_cpu(
            &finite,
            rows,
            cols,
            params,
            8192,
            &format!("finite {params:?}"),
        );
    }
    // A noise floor with every special value planted in it.
    let mut map: Vec<f32> = (0..rows * cols)
        .map(|_| -(1.0 - rng.random::<f64>()).ln() as f32 * 1e6)
        .collect();
    let specials = [
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1e9,
        -0.0,
        f32::MAX,
        2f32.powi(78),
        2f32.powi(78).next_down(),
        f32::MIN_POSITIVE,
        1e-45,
        3e7,
    ];
    for (k, value) in specials.iter().enumerate() {
        for copy in 0..4 {
            let at = (k * 397 + copy * 1531) % map.len();
            map[at] = *value;
        }
    }
    let (_, found) = assert_same_as_cpu(&map, rows, cols, &[], 8192, "planted specials");
    assert!(found.iter().any(|d| d.power == f32::INFINITY));
    assert_same_as_cpu(
        &map,
        rows,
        cols,
        &[("pfa", "1e-2")],
        8192,
        "planted specials",
    );
}

#[test]
fn cfar_ties_follow_the_contract() {
    // Flat maps with alpha = 1: every cell sits on its threshold, decided by the roundings.
    for value in [1000.0f32, 0.1, 3.0e-9, 7.5e12, 1.0e17] {
        let map = vec![value; 64 * 48];
        for scale in ["1", "0.999999999999"] {
            assert_same_as_cpu(
                &map,
                64,
                48,
                &[("scale", scale)],
                4096,
                &format!("{value} x {scale}"),
            );
        }
    }
}

#[test]
fn cfar_windows_and_shapes_match_the_cpu_library() {
    let mut rng = StdRng::seed_from_u64(8);
    for (rows, cols, guard, train) in [
        (37u64, 23u64, 2u32, 8u32),
        (21, 21, 2, 8),
        (96, 40, 0, 1),
        (96, 40, 1, 3),
        (96, 40, 0, 12),
        (127, 64, 3, 9),
        (64, 512, 2, 8),
    ] {
        let map: Vec<f32> = (0..rows * cols)
            .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 5e3) as f32)
            .collect();
        let (g, t) = (guard.to_string(), train.to_string());
        let params = [
            ("guard", g.as_str()),
            ("train", t.as_str()),
            ("pfa", "1e-2"),
        ];
        let (_, found) = assert_same_as_cpu(
            &map,
            rows,
            cols,
            &params,
            rows * cols,
            &format!("{rows}x{cols} guard {guard} train {train}"),
        );
        assert!(!found.is_empty(), "{rows}x{cols}: nothing detected");
    }
}

#[test]
fn cfar_overflow_keeps_the_first_detections_in_row_major_order() {
    let (rows, cols) = (128u64, 64u64);
    let mut rng = StdRng::seed_from_u64(5);
    let map: Vec<f32> = (0..rows * cols)
        .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 1e3) as f32)
        .collect();
    let params = [("pfa", "1e-2")];
    let (all_header, all) = gpu_cfar(&map, rows, cols, &params, rows * cols);
    assert!(all.len() > 20, "need a long list, got {}", all.len());
    assert_eq!(all_header.overflow, 0);
    let order: Vec<(u32, u32)> = all.iter().map(|d| (d.range_bin, d.doppler_bin)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "row-major order");
    for capacity in [0, 1, 10, all.len() - 1, all.len(), all.len() + 5] {
        let (header, kept) =
            assert_same_as_cpu(&map, rows, cols, &params, capacity as u64, "overflow");
        let n = capacity.min(all.len());
        assert_eq!(header.count as usize, n);
        assert_eq!(header.capacity as usize, capacity);
        assert_eq!(header.overflow as usize, all.len() - n);
        assert_eq!(kept, all[..n]);
    }
}

#[test]
fn cfar_compaction_spans_many_chunks_and_scan_runs() {
    // 512 x 1024 cells: 2048 chunks, so each scan thread owns a run of two; detections in the
    // first and last cells, at chunk and run boundaries, and a dense band.
    let (rows, cols) = (512u64, 1024u64);
    let mut map = vec![100.0f32; (rows * cols) as usize];
    let chunk = CHUNK as usize;
    let run = 2 * chunk;
    for at in [
        0,
        chunk - 1,
        chunk,
        run - 1,
        run,
        3 * run + 5,
        1000 * run + run - 1,
        map.len() - 1,
    ] {
        map[at] = 1e7;
    }
    for d in 0..cols as usize {
        map[200 * cols as usize + d] = if d % 3 == 0 { 1e7 } else { 100.0 };
    }
    let (header, found) = assert_same_as_cpu(&map, rows, cols, &[], 4096, "boundaries");
    assert!(header.count as usize >= 8 + cols as usize / 3 - 2);
    assert_eq!(
        found.first().map(|d| (d.range_bin, d.doppler_bin)),
        Some((0, 0))
    );
    assert_eq!(
        found.last().map(|d| (d.range_bin, d.doppler_bin)),
        Some((rows as u32 - 1, cols as u32 - 1))
    );
}

#[test]
fn cfar_chunks_spanning_rows_at_a_size_not_a_multiple_of_the_chunk() {
    // 101 x 77 = 7777 cells: 31 chunks, the last of 97 cells, most spanning two or three rows.
    let (rows, cols) = (101u64, 77u64);
    let cells = (rows * cols) as usize;
    assert_ne!(cells % CHUNK as usize, 0);
    let mut rng = StdRng::seed_from_u64(13);
    let mut map: Vec<f32> = (0..cells)
        .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 1e3) as f32)
        .collect();
    let chunk = CHUNK as usize;
    // Around chunk boundaries, around row ends inside chunks, in the last partial chunk.
    let planted = [
        chunk - 1,
        chunk,
        2 * chunk + 1,
        3 * cols as usize - 1,
        3 * cols as usize,
        cells - 97,
        cells - 2,
        cells - 1,
    ];
    for &at in &planted {
        map[at] = 1e9;
    }
    let (header, found) = assert_same_as_cpu(&map, rows, cols, &[], 4096, "odd size");
    assert_eq!(header.overflow, 0);
    let cols32 = cols as u32;
    for at in planted {
        let cell = ((at / cols as usize) as u32, (at % cols as usize) as u32);
        assert!(
            found.iter().any(|d| (d.range_bin, d.doppler_bin) == cell),
            "{cell:?} detected"
        );
    }
    let order: Vec<u64> = found
        .iter()
        .map(|d| u64::from(d.range_bin) * u64::from(cols32) + u64::from(d.doppler_bin))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "row-major order");
}

#[test]
fn cfar_without_detections_writes_an_empty_list() {
    let (rows, cols) = (96u64, 200u64);
    let zeros = vec![0.0f32; (rows * cols) as usize];
    let mut rng = StdRng::seed_from_u64(17);
    let noise: Vec<f32> = (0..rows * cols)
        .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 1e3) as f32)
        .collect();
    for (map, params) in [
        (&zeros, &[][..]),
        (&zeros, &[("scale", "0")][..]),
        (&noise, &[("scale", "1e12")][..]),
    ] {
        for capacity in [0, 1, 64] {
            let (header, found) =
                assert_same_as_cpu(map, rows, cols, params, capacity, "no detections");
            assert_eq!(
                (header.count, header.capacity, header.overflow),
                (0, capacity as u32, 0),
                "{params:?}"
            );
            assert!(found.is_empty());
        }
    }
}

#[test]
fn cfar_overflow_on_a_dense_map_counts_every_detection() {
    // 333 x 1000: 1301 chunks (more than the scan's threads, the last partial), with a
    // detection rate of tens of percent, and capacities far below the count.
    let (rows, cols) = (333u64, 1000u64);
    let mut rng = StdRng::seed_from_u64(19);
    let map: Vec<f32> = (0..rows * cols)
        .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 1e3) as f32)
        .collect();
    let params = [("scale", "1"), ("guard", "1"), ("train", "2")];
    let (all, everything) = gpu_cfar(&map, rows, cols, &params, rows * cols);
    assert!(
        everything.len() > 10_000,
        "dense: {} detections",
        everything.len()
    );
    assert_eq!(all.overflow, 0);
    for capacity in [0u64, 1, 1000, everything.len() as u64 - 1] {
        let (header, kept) = assert_same_as_cpu(&map, rows, cols, &params, capacity, "dense");
        assert_eq!(header.count as u64, capacity);
        assert_eq!(
            header.overflow as usize,
            everything.len() - capacity as usize
        );
        assert_eq!(kept, everything[..capacity as usize]);
    }
}

/// The error messages of the CPU and GPU libraries for one configuration.
fn both_errors(params: &[(&str, &str)], rows: u64, cols: u64, capacity: u64) -> (String, String) {
    let gpu = Setup::new(
        params,
        &[desc(Dtype::F32, &[rows, cols])],
        &[desc(Dtype::RECORDS, &[capacity])],
    );
    let cpu = Setup::new(
        params,
        &[host_desc(Dtype::F32, &[rows, cols])],
        &[host_desc(Dtype::RECORDS, &[capacity])],
    );
    let gpu = CfarPlan::from_config(&gpu.config())
        .expect_err("GPU refuses")
        .message;
    let cpu = cpu
        .create::<kplace_cpu::Cfar>()
        .expect_err("CPU refuses")
        .message;
    (gpu, cpu)
}

#[test]
fn cfar_refuses_what_the_cpu_library_refuses_with_the_same_words() {
    for params in [
        &[("gaurd", "2")][..],
        &[("pfa", "1e-6"), ("scale", "14")],
        &[("train", "40")],
        &[("guard", "30"), ("train", "2")],
        &[("train", "0")],
        &[("guard", "two")],
        &[("pfa", "1.5")],
        &[("pfa", "0")],
        &[("scale", "-1")],
        &[("scale", "inf")],
        &[("train", "600")],
    ] {
        let (gpu, cpu) = both_errors(params, 128, 64, 100);
        assert_eq!(gpu, cpu, "{params:?}");
    }
    // Defaults, and alpha and scale computed as the CPU library computes them.
    let setup = |memory_desc: fn(Dtype, &[u64]) -> kplace_abi::TensorDesc| {
        Setup::new(
            &[("pfa", "1e-3"), ("guard", "1"), ("train", "4")],
            &[memory_desc(Dtype::F32, &[64, 64])],
            &[memory_desc(Dtype::RECORDS, &[16])],
        )
    };
    let gpu = CfarPlan::from_config(&setup(desc).config()).unwrap();
    let cpu: kplace_cpu::Cfar = setup(host_desc).create().unwrap();
    assert_eq!(gpu.alpha().to_bits(), cpu.alpha().to_bits());
    assert_eq!(gpu.scale().to_bits(), cpu.scale().to_bits());
    let _ = cpu.workspace_bytes();
}

#[test]
fn fft_stages_refuse_what_the_cpu_library_refuses() {
    let (i, o) = (desc(Dtype::CI16, &[64, 32]), desc(Dtype::CF32, &[32, 64]));
    let (hi, ho) = (
        host_desc(Dtype::CI16, &[64, 32]),
        host_desc(Dtype::CF32, &[32, 64]),
    );
    for (params, split) in [
        (&[("planner", "fast")][..], None),
        (&[("plan", "estimate")], None),
        (&[], Some((0, 5))),
        (&[], Some((1, 8))),
    ] {
        let gpu = RangeFftPlan::from_config(&Setup::split(params, &[i], &[o], split).config())
            .expect_err("GPU refuses")
            .message;
        let cpu = Setup::split(params, &[hi], &[ho], split)
            .create::<kplace_cpu::RangeFft>()
            .expect_err("CPU refuses")
            .message;
        assert_eq!(gpu, cpu, "{params:?} {split:?}");
    }
    // Host memory is refused by name.
    let host = RangeFftPlan::from_config(&Setup::new(&[], &[hi], &[o]).config());
    assert!(host.err().unwrap().message.contains("device memory"));
    let (di, dout) = (desc(Dtype::CF32, &[32, 64]), desc(Dtype::F32, &[32, 64]));
    let split =
        DopplerFftPlan::from_config(&Setup::split(&[], &[di], &[dout], Some((0, 8))).config());
    assert!(split.err().unwrap().message.contains("cannot be split"));
    let shape = DopplerFftPlan::from_config(
        &Setup::new(&[], &[di], &[desc(Dtype::F32, &[64, 32])]).config(),
    );
    assert!(shape.err().unwrap().message.contains("output 0"));
}

#[test]
fn cfar_rounds_training_sums_to_nearest() {
    // Four training cells of cell X whose q values sum to S = 2^81 - 1, which has more bits
    // than an f64 holds: to nearest it is 2^81, truncated 2^81 - 2^28. With scale 2^-60 the
    // threshold is exactly 2^21 only when S is rounded to nearest, and X's power is 2^21: a
    // kernel that truncated (or summed in f64 in some order) would detect X.
    let (rows, cols) = (96u64, 64u64);
    let mut map = vec![0.0f32; (rows * cols) as usize];
    let at = |r: u64, d: u64| (r * cols + d) as usize;
    let (r, d) = (40, 40);
    map[at(r, d)] = 2f32.powi(21);
    map[at(r + 3, d)] = 2f32.powi(73) - 2f32.powi(50);
    map[at(r, d + 4)] = 2f32.powi(50) - 2f32.powi(27);
    map[at(r - 5, d - 5)] = 2f32.powi(27) - 2f32.powi(4);
    map[at(r + 8, d + 8)] = 16.0 - 1.0 / 256.0;
    let alpha = 416.0 * 2f64.powi(8 - 60);
    assert_eq!(
        kplace_kernels::cfar::threshold_scale(alpha, 416),
        2f64.powi(-60)
    );
    let alpha = alpha.to_string();
    let (_, found) = assert_same_as_cpu(&map, rows, cols, &[("scale", &alpha)], 4096, "rounding");
    assert!(
        !found
            .iter()
            .any(|x| (x.range_bin, x.doppler_bin) == (r as u32, d as u32)),
        "X sits exactly on its threshold"
    );
    // Half an ulp of the threshold more and it detects.
    map[at(r, d)] = 2f32.powi(21).next_up();
    let (_, found) = assert_same_as_cpu(&map, rows, cols, &[("scale", &alpha)], 4096, "rounding");
    assert!(
        found
            .iter()
            .any(|x| (x.range_bin, x.doppler_bin) == (r as u32, d as u32))
    );
}
