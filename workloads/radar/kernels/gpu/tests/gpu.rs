//! The kernels on a real CUDA device, through the library: create with the primary context
//! current, launch on a stream, synchronize here in the test, compare.
//!
//! - The FFT stages against an f64 FFT (rustfft): max-abs error within 1e-5 of max-abs.
//! - CFAR against the CPU library on scene maps: identical lists.
//! - The range stage's tiles (of 1, 16 and 128 chirps, and unsplit) enqueued from two threads
//!   at once, and a lone tile writing only its columns of the output.
//!
//! (A kernel driven through the C ABI table is in `library.rs`: this binary links the CPU
//! library too, and which of the two `kplace_library_entry` symbols it gets is the linker's
//! choice; see build.rs.)
//!
//! Without a CUDA driver, a device, cuFFT or NVRTC, every test prints `skipped: <reason>`
//! and passes, unless `KPLACE_REQUIRE_GPU=1`, when it fails with that reason.

mod common;

use common::device::*;
use common::*;
use cudarc::driver::result;
use kplace_abi::export::KernelImpl;
use kplace_abi::{Dtype, RecordListHeader, Tile};
use kplace_gpu::{Cfar, DopplerFft, RangeFft};
use kplace_kernels::Detection;
use kplace_kernels::window::hann;
use kplace_radar::scene::high_snr_targets;
use kplace_radar::{Cpi, Scene, SceneConfig, reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

/// The range FFT in f64, range-major.
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

#[test]
fn range_fft_matches_an_f64_fft_with_tiles_from_two_threads() {
    let Some(gpu) = Gpu::open() else { return };
    // cuFFT writes the range-major output through its strided layout: tiles of one chirp,
    // of 16, of a quarter of the frame (the GPU's default), and the whole frame.
    for (m, n, tile) in [
        (128u64, 1024u64, Some(16u64)),
        (64, 256, Some(1)),
        (512, 512, Some(128)),
        (128, 1024, None),
    ] {
        let mut rng = StdRng::seed_from_u64(m + n);
        let iq: Vec<[i16; 2]> = (0..m * n)
            .map(|_| [rng.random_range(-2000..2000), rng.random_range(-2000..2000)])
            .collect();
        let (i, o) = (desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[n, m]));
        let kernel: RangeFft = Setup::split(&[], &[i], &[o], tile.map(|t| (0, t)))
            .create()
            .expect("create");
        let (input, output) = (DevBuf::from_slice(&iq), DevBuf::zeroed(o.bytes as usize));
        let size = tile.unwrap_or(m);
        let tiles = m / size;
        // One workspace per tile: tiles may be in flight together.
        let workspaces: Vec<DevBuf> = (0..tiles)
            .map(|_| DevBuf::zeroed(kernel.workspace_bytes() as usize))
            .collect();
        std::thread::scope(|scope| {
            for half in 0..2u64 {
                let (kernel, gpu, input, output, workspaces) =
                    (&kernel, &gpu, &input, &output, &workspaces);
                scope.spawn(move || {
                    gpu.bind_here();
                    for t in (half..tiles).step_by(2) {
                        let tile = Tile {
                            begin: t * size,
                            count: size,
                        };
                        enqueue(
                            kernel,
                            gpu.stream,
                            (i, input),
                            (o, output),
                            &workspaces[t as usize],
                            tile,
                        )
                        .expect("launch");
                    }
                });
            }
        });
        gpu.sync();
        let got = output.to_vec::<[f32; 2]>();
        let want = range_model(&iq, m as usize, n as usize);
        assert_within_peak(
            parts(&got),
            want.iter().flat_map(|c| [c.re, c.im]),
            format_args!("{m}x{n} tile {tile:?}"),
        );
    }
}

#[test]
fn a_range_tile_writes_only_its_columns() {
    let Some(gpu) = Gpu::open() else { return };
    let (m, n) = (512u64, 256u64);
    let mut rng = StdRng::seed_from_u64(4);
    let iq: Vec<[i16; 2]> = (0..m * n)
        .map(|_| [rng.random_range(-2000..2000), rng.random_range(-2000..2000)])
        .collect();
    let want = range_model(&iq, m as usize, n as usize);
    let (i, o) = (desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[n, m]));
    let sentinel = [f32::from_bits(0x7fc0_1234), -7.0];
    let input = DevBuf::from_slice(&iq);
    for (size, index) in [(1u64, 0u64), (1, 511), (128, 1), (128, 3)] {
        let kernel: RangeFft = Setup::split(&[], &[i], &[o], Some((0, size)))
            .create()
            .expect("create");
        let output = DevBuf::from_slice(&vec![sentinel; (m * n) as usize]);
        let workspace = DevBuf::zeroed(kernel.workspace_bytes() as usize);
        let tile = Tile {
            begin: index * size,
            count: size,
        };
        enqueue(
            &kernel,
            gpu.stream,
            (i, &input),
            (o, &output),
            &workspace,
            tile,
        )
        .expect("launch");
        gpu.sync();
        let got = output.to_vec::<[f32; 2]>();
        let columns = tile.begin..tile.begin + size;
        let (mut err, mut peak) = (0f64, 0f64);
        for (at, value) in got.iter().enumerate() {
            let chirp = at as u64 % m;
            if columns.contains(&chirp) {
                let w = want[at];
                peak = peak.max(w.re.abs()).max(w.im.abs());
                err = err
                    .max((f64::from(value[0]) - w.re).abs())
                    .max((f64::from(value[1]) - w.im).abs());
            } else {
                assert_eq!(
                    value.map(f32::to_bits),
                    sentinel.map(f32::to_bits),
                    "tile {size} #{index}: element {at} (chirp {chirp}) outside the tile"
                );
            }
        }
        assert!(
            err / peak < 1e-5,
            "tile {size} #{index}: error {:.2e}",
            err / peak
        );
    }
}

#[test]
fn doppler_fft_matches_an_f64_fft() {
    let Some(gpu) = Gpu::open() else { return };
    let (n, m) = (1024u64, 128u64);
    let mut rng = StdRng::seed_from_u64(2);
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

    let (i, o) = (desc(Dtype::CF32, &[n, m]), desc(Dtype::F32, &[n, m]));
    let kernel: DopplerFft = Setup::new(&[], &[i], &[o]).create().expect("create");
    let (input, output) = (DevBuf::from_slice(&map), DevBuf::zeroed(o.bytes as usize));
    let ws = DevBuf::zeroed(kernel.workspace_bytes() as usize);
    enqueue(
        &kernel,
        gpu.stream,
        (i, &input),
        (o, &output),
        &ws,
        whole(n),
    )
    .expect("launch");
    gpu.sync();
    assert_within_peak(
        output.to_vec::<f32>().iter().map(|&p| f64::from(p)),
        rows.iter().map(|c| c.norm_sqr()),
        "power",
    );
    assert_eq!(
        input.to_vec::<[f32; 2]>(),
        map,
        "the input is left as it was"
    );
}

/// The power map of a frame through the GPU range and Doppler kernels.
fn gpu_power_map(gpu: &Gpu, iq: &[[i16; 2]], cpi: Cpi) -> Vec<f32> {
    let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
    let (iq_d, map_d, power_d) = (
        desc(Dtype::CI16, &[m, n]),
        desc(Dtype::CF32, &[n, m]),
        desc(Dtype::F32, &[n, m]),
    );
    let range: RangeFft = Setup::split(&[], &[iq_d], &[map_d], Some((0, 16)))
        .create()
        .expect("create");
    let doppler: DopplerFft = Setup::new(&[], &[map_d], &[power_d])
        .create()
        .expect("create");
    let input = DevBuf::from_slice(iq);
    let map = DevBuf::zeroed(map_d.bytes as usize);
    let power = DevBuf::zeroed(power_d.bytes as usize);
    let ws = DevBuf::zeroed(range.workspace_bytes().max(doppler.workspace_bytes()) as usize);
    for t in 0..m / 16 {
        let tile = Tile {
            begin: t * 16,
            count: 16,
        };
        // Stream order makes reusing one workspace safe here.
        enqueue(&range, gpu.stream, (iq_d, &input), (map_d, &map), &ws, tile).expect("range");
    }
    enqueue(
        &doppler,
        gpu.stream,
        (map_d, &map),
        (power_d, &power),
        &ws,
        whole(n),
    )
    .expect("doppler");
    gpu.sync();
    power.to_vec::<f32>()
}

type List = (RecordListHeader, Vec<Detection>);

fn gpu_cfar(
    gpu: &Gpu,
    map: &[f32],
    rows: u64,
    cols: u64,
    params: &[(&str, &str)],
    capacity: u64,
) -> List {
    let (i, o) = (
        desc(Dtype::F32, &[rows, cols]),
        desc(Dtype::RECORDS, &[capacity]),
    );
    let kernel: Cfar = Setup::new(params, &[i], &[o]).create().expect("create");
    let input = DevBuf::from_slice(map);
    let output = DevBuf::zeroed(o.bytes as usize);
    // Garbage where the kernel must write.
    // SAFETY: the buffer holds o.bytes bytes.
    unsafe { result::memset_d8_sync(output.ptr, 0xA5, output.len) }.expect("cuMemset");
    let ws = DevBuf::zeroed(kernel.workspace_bytes() as usize);
    enqueue(
        &kernel,
        gpu.stream,
        (i, &input),
        (o, &output),
        &ws,
        whole(rows),
    )
    .expect("launch");
    gpu.sync();
    read_list(&output.bytes())
}

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

#[track_caller]
fn assert_same_as_cpu(
    gpu: &Gpu,
    map: &[f32],
    rows: u64,
    cols: u64,
    params: &[(&str, &str)],
    capacity: u64,
    what: &str,
) -> List {
    let got = gpu_cfar(gpu, map, rows, cols, params, capacity);
    let want = cpu_cfar(map, rows, cols, params, capacity);
    assert_eq!(got.0, want.0, "{what}: headers");
    let bits = |l: &[Detection]| -> Vec<(u32, u32, u32)> {
        l.iter()
            .map(|d| (d.range_bin, d.doppler_bin, d.power.to_bits()))
            .collect()
    };
    assert!(
        bits(&got.1) == bits(&want.1),
        "{what}: {} vs {} detections",
        got.1.len(),
        want.1.len()
    );
    got
}

#[test]
fn scenes_through_the_gpu_pipeline_match_the_reference_and_the_cpu_cfar() {
    let Some(gpu) = Gpu::open() else { return };
    let default = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    let mut high = default.clone();
    high.targets = high_snr_targets();
    let mut noise = default.clone();
    noise.targets.clear();
    noise.seed = 11;
    let mut large = SceneConfig::new(Cpi {
        samples: 4096,
        chirps: 512,
    });
    large.targets = high_snr_targets();
    for (name, config) in [
        ("default", default),
        ("high SNR", high),
        ("noise", noise),
        ("4096x512", large),
    ] {
        let cpi = config.cpi;
        let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
        let targets = config.targets.len();
        let scene = Scene::new(config).unwrap();
        let mut iq = vec![[0i16; 2]; cpi.cells()];
        for frame in 0..2 {
            scene.generate_frame(frame, &mut iq).unwrap();
            let got = gpu_power_map(&gpu, &iq, cpi);
            let want = reference::range_doppler_power(&iq, cpi);
            assert_within_peak(
                got.iter().map(|&p| f64::from(p)),
                want.iter().copied(),
                format_args!("{name} frame {frame}: power"),
            );
            let what = format!("{name} frame {frame}");
            let (header, found) = assert_same_as_cpu(&gpu, &got, n, m, &[], 16384, &what);
            assert_eq!(header.overflow, 0, "{what}");
            if targets > 0 {
                assert!(found.len() >= targets, "{what}: targets detected");
            }
            // A small list overflows the same way on both.
            let (small, _) = assert_same_as_cpu(&gpu, &got, n, m, &[("pfa", "1e-2")], 7, &what);
            assert!(small.overflow > 0, "{what}: the small list overflows");
        }
    }
}

#[test]
fn cfar_on_extreme_values_matches_the_cpu_library() {
    let Some(gpu) = Gpu::open() else { return };
    let (rows, cols) = (96u64, 64u64);
    let mut rng = StdRng::seed_from_u64(77);
    let bits: Vec<f32> = (0..rows * cols)
        .map(|_| f32::from_bits(rng.random()))
        .collect();
    for scale in ["0.5", "2"] {
        assert_same_as_cpu(
            &gpu,
            &bits,
            rows,
            cols,
            &[("scale", scale)],
            8192,
            "random bits",
        );
    }
    for value in [1000.0f32, 0.1, 7.5e12, 1.0e17] {
        let flat = vec![value; (rows * cols) as usize];
        assert_same_as_cpu(&gpu, &flat, rows, cols, &[("scale", "1")], 8192, "ties");
    }
}

/// Without a GPU, `KPLACE_REQUIRE_GPU=1` makes a GPU test of this binary fail with the reason
/// it would have skipped for; unset, the same test skips with it.
#[test]
fn without_a_gpu_a_required_gpu_fails_the_gpu_tests() {
    if kplace_gpu::probe().is_ok() {
        println!("skipped: a GPU is present (the GPU tests run for real)");
        return;
    }
    let run =
        |require: bool| kplace_testkit::gpu::rerun_test("doppler_fft_matches_an_f64_fft", require);
    let (passed, text) = run(false);
    assert!(passed && text.contains("skipped: "), "{text}");
    let (passed, text) = run(true);
    assert!(!passed, "{text}");
    assert!(
        text.contains("KPLACE_REQUIRE_GPU=1 but libcuda could not be loaded"),
        "{text}"
    );
}
