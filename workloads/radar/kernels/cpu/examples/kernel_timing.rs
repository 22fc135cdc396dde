//! Kernel-only timing: the four radar kernels back to back on one thread, without the
//! runtime, at the three CPI sizes of docs/workload.md. Prints each kernel's time per frame and
//! the chain's CPIs per second: the bound a pipeline's per-core rate is measured against.
//!
//! `cargo run --release -p kplace-cpu --example kernel_timing [-- SECONDS_PER_KERNEL [NxM]]`
//!
//! `KPLACE_CFAR_COPY=avx2|portable` times the CFAR's AVX2 or portable code instead of the best
//! the CPU offers.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::f64::consts::PI;
use std::ffi::CString;
use std::time::{Duration, Instant};

use kplace_abi::export::{Config, KernelImpl, Launch};
use kplace_abi::{
    Dtype, KernelConfig, LaunchArgs, MemorySpace, Param, RecordListHeader, SPLIT_NONE, Tensor,
    TensorDesc, Tile,
};
use kplace_cpu::{Cfar, Cluster, DopplerFft, RangeFft};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A zeroed 64-byte-aligned buffer.
struct Buf {
    ptr: *mut u8,
    layout: Layout,
}

impl Buf {
    fn new(bytes: u64) -> Self {
        let layout = Layout::from_size_align((bytes as usize).max(1), 64).expect("layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation failed");
        Self { ptr, layout }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

fn desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    let mut shape = [0; kplace_abi::MAX_RANK];
    shape[..dims.len()].copy_from_slice(dims);
    TensorDesc {
        dtype,
        memory: MemorySpace::HOST,
        rank: dims.len() as u32,
        reserved: 0,
        shape,
        bytes: dtype.bytes_for(dims).expect("size"),
    }
}

/// One stage: a created kernel, its ports and its workspace.
struct Stage<K> {
    kernel: K,
    input: TensorDesc,
    output: TensorDesc,
    workspace: Buf,
}

fn stage<K: KernelImpl>(
    params: &[(&str, String)],
    input: TensorDesc,
    output: TensorDesc,
) -> Stage<K> {
    let strings: Vec<(CString, CString)> = params
        .iter()
        .map(|(n, v)| {
            (
                CString::new(*n).expect("name"),
                CString::new(v.as_str()).expect("value"),
            )
        })
        .collect();
    let raw_params: Vec<Param> = strings
        .iter()
        .map(|(n, v)| Param {
            name: n.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let raw = KernelConfig {
        params: raw_params.as_ptr(),
        inputs: &input,
        outputs: &output,
        n_params: raw_params.len() as u32,
        n_inputs: 1,
        n_outputs: 1,
        split_axis: SPLIT_NONE,
        tile: 0,
        device_ordinal: 0,
        reserved: 0,
    };
    // SAFETY: every pointer in `raw` is valid for this call.
    let config = unsafe { Config::from_raw(&raw) }.expect("config");
    let kernel = K::create(&config).unwrap_or_else(|e| panic!("create {:?}: {e}", K::NAME));
    let workspace = Buf::new(kernel.workspace_bytes());
    Stage {
        kernel,
        input,
        output,
        workspace,
    }
}

impl<K: KernelImpl> Stage<K> {
    fn run(&self, input: &Buf, output: &Buf) {
        let inputs = [Tensor {
            desc: self.input,
            data: input.ptr.cast(),
        }];
        let outputs = [Tensor {
            desc: self.output,
            data: output.ptr.cast(),
        }];
        let args = LaunchArgs {
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_inputs: 1,
            n_outputs: 1,
            workspace: self.workspace.ptr.cast(),
            workspace_bytes: self.kernel.workspace_bytes(),
            stream: std::ptr::null_mut(),
            tile: Tile {
                begin: 0,
                count: self.input.shape[0],
            },
            ..Default::default()
        };
        // SAFETY: every pointer in `args` is valid for the launch.
        let launch = unsafe { Launch::from_raw(&args) };
        self.kernel
            .launch(&launch)
            .unwrap_or_else(|e| panic!("launch {:?}: {e}", K::NAME));
    }
}

/// Seconds per call of `f`: the best of nine batches filling about `budget` (on a shared or
/// virtual machine the minimum is the stablest estimate of the code's own cost).
fn time(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    f();
    let once = start.elapsed().max(Duration::from_micros(1));
    let per_batch = ((budget.as_secs_f64() / 9.0) / once.as_secs_f64())
        .ceil()
        .max(1.0) as u32;
    (0..9)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            start.elapsed().as_secs_f64() / f64::from(per_batch)
        })
        .fold(f64::INFINITY, f64::min)
}

/// One frame of the default scene's shape: noise of sigma 512 counts and three tones.
fn scene(samples: usize, chirps: usize, iq: &Buf) {
    let mut rng = StdRng::seed_from_u64(1);
    // SAFETY: the buffer holds chirps * samples * 2 i16.
    let out = unsafe { std::slice::from_raw_parts_mut(iq.ptr.cast::<i16>(), 2 * samples * chirps) };
    let targets = [(60.5, 3.2), (150.0, -10.7), (240.25, 20.0)];
    let amplitude = 512.0 * 10f64.powf(6.0 / 20.0);
    let mut gauss = || {
        let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        512.0 * (-2.0 * u.ln()).sqrt() * (2.0 * PI * v).cos()
    };
    for m in 0..chirps {
        for n in 0..samples {
            let (mut re, mut im) = (gauss(), gauss());
            for (rb, db) in targets {
                let phase =
                    2.0 * PI * (rb * n as f64 / samples as f64 + db * m as f64 / chirps as f64);
                re += amplitude * phase.cos();
                im += amplitude * phase.sin();
            }
            out[2 * (m * samples + n)] = re.round().clamp(-32768.0, 32767.0) as i16;
            out[2 * (m * samples + n) + 1] = im.round().clamp(-32768.0, 32767.0) as i16;
        }
    }
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.5);
    let budget = Duration::from_secs_f64(seconds);
    let only = std::env::args().nth(2);
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9}",
        "CPI",
        "range us",
        "doppler us",
        "cfar us",
        "cluster us",
        "chain us",
        "CPI/s",
        "cfar %",
        "clusters"
    );
    for (samples, chirps) in [(1024u64, 128u64), (2048, 256), (4096, 512)] {
        if only
            .as_ref()
            .is_some_and(|only| *only != format!("{samples}x{chirps}"))
        {
            continue;
        }
        let iq_desc = desc(Dtype::CI16, &[chirps, samples]);
        let cube_desc = desc(Dtype::CF32, &[samples, chirps]);
        let power_desc = desc(Dtype::F32, &[samples, chirps]);
        let cfar_desc = desc(Dtype::RECORDS, &[4096]);
        let cluster_desc = desc(Dtype::RECORDS, &[1024]);
        let range: Stage<RangeFft> = stage(&[], iq_desc, cube_desc);
        let doppler: Stage<DopplerFft> = stage(&[], cube_desc, power_desc);
        let mut cfar: Stage<Cfar> = stage(&[], power_desc, cfar_desc);
        cfar.kernel = match std::env::var("KPLACE_CFAR_COPY").as_deref() {
            Ok("avx2") => cfar.kernel.avx2(),
            Ok("portable") => cfar.kernel.portable(),
            _ => cfar.kernel,
        };
        let bins = [
            ("range_bins", samples.to_string()),
            ("doppler_bins", chirps.to_string()),
        ];
        let cluster: Stage<Cluster> = stage(&bins, cfar_desc, cluster_desc);

        let bufs =
            [iq_desc, cube_desc, power_desc, cfar_desc, cluster_desc].map(|d| Buf::new(d.bytes));
        scene(samples as usize, chirps as usize, &bufs[0]);
        let t = [
            time(budget, || range.run(&bufs[0], &bufs[1])),
            time(budget, || doppler.run(&bufs[1], &bufs[2])),
            time(budget, || cfar.run(&bufs[2], &bufs[3])),
            time(budget, || cluster.run(&bufs[3], &bufs[4])),
        ];
        // The four back to back, each reading what the one before wrote: the kernel-only rate.
        let chain = time(budget * 2, || {
            range.run(&bufs[0], &bufs[1]);
            doppler.run(&bufs[1], &bufs[2]);
            cfar.run(&bufs[2], &bufs[3]);
            cluster.run(&bufs[3], &bufs[4]);
        });
        // SAFETY: the cluster output starts with a header.
        let header = unsafe { *bufs[4].ptr.cast::<RecordListHeader>() };
        println!(
            "{:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.0} {:>7.1} {:>9}",
            format!("{samples}x{chirps}"),
            t[0] * 1e6,
            t[1] * 1e6,
            t[2] * 1e6,
            t[3] * 1e6,
            chain * 1e6,
            1.0 / chain,
            100.0 * t[2] / chain,
            header.count
        );
        println!(
            "{:>10} workspace bytes: range {}, doppler {}, cfar {}, cluster {}",
            "",
            range.kernel.workspace_bytes(),
            doppler.kernel.workspace_bytes(),
            cfar.kernel.workspace_bytes(),
            cluster.kernel.workspace_bytes()
        );
    }
}
