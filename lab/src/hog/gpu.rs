//! The GPU co-tenant: a cuBLAS SGEMM loop on one device, with a duty cycle.
//!
//! # How it loads the GPU
//! Three `size` x `size` f32 matrices are allocated once (A and B filled with 0.5, C written by
//! every GEMM: `C = A * B`). Time is cut into periods (100 ms by default); in each, the hog
//! runs GEMMs for `duty` of the period, then sleeps for the rest. GEMMs are enqueued in
//! batches sized to about [`BATCH_TARGET`] of GPU time (measured once after a warm-up GEMM)
//! and the stream is synchronized after every batch, so the hog never queues more than one
//! batch ahead, notices a stop within one batch, and ends each busy phase with the GPU idle.
//!
//! TFLOP/s count `2 n^3` floating-point operations per GEMM. cuBLAS runs SGEMM in full FP32
//! (its default math mode: no TF32 tensor cores), so the figure compares with the device's
//! FP32 peak.
//!
//! # Layering
//! The device comes from [`kplace::cuda::driver::CudaGpu`] (which never panics when the driver
//! is missing), its memory and stream are [`kplace::cuda::owned`] handles; cuBLAS through cudarc's `cublas::result` layer
//! with a handle this module creates and destroys. cudarc's safe `CudaBlas` is not used: it
//! needs cudarc's `CudaContext`, which panics without a driver, and its `Drop` unwraps.
//!
//! # What it guarantees
//! - Never panics for a missing driver, device or cuBLAS: [`run`] answers
//!   [`HogError::Gpu`] ("no CUDA driver found ...", "no such device ...") or
//!   [`HogError::NoCublas`]. cuBLAS is loaded only after checking that it can be; a panic
//!   left in cudarc (a symbol missing from an unexpected libcublas) is caught and reported.
//! - Everything allocated is freed on every path, after the stream has drained.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::sys as cu;

use super::{HogError, HogEvent, HogKind, HogLine, StopFlag, StopReason, duration_of, sleep_until};
use kplace::cuda::driver::CudaGpu;
use kplace::cuda::owned::{GpuMemory, MemoryKind, OwnedStream};
use kplace::cuda::probe::panic_text;
use kplace::cuda::{Gpu, GpuError};

/// GPU time one batch of GEMMs aims at, between two synchronizations.
pub const BATCH_TARGET: Duration = Duration::from_millis(5);

/// The most GEMMs in one batch (for tiny matrices).
const MAX_BATCH: u64 = 10_000;

/// The largest matrix side accepted: three 32768^2 f32 matrices take 12 GiB.
pub const MAX_SIZE: usize = 32_768;

/// What the GPU hog runs.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuHogConfig {
    /// The device ordinal.
    pub gpu: u32,
    /// The matrices' side n (n x n), 1 to [`MAX_SIZE`].
    pub size: usize,
    /// Fraction of each period spent running GEMMs, in [0, 1].
    pub duty: f64,
    /// The duty cycle's period (> 0).
    pub period: Duration,
    /// Stop after this many seconds; `None` runs until stopped.
    pub seconds: Option<f64>,
    /// Seconds between two `report` lines (> 0).
    pub report_every_s: f64,
}

impl GpuHogConfig {
    /// The default period of the duty cycle.
    pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

    /// The longest period accepted.
    pub const MAX_PERIOD: Duration = Duration::from_secs(3600);

    fn validate(&self) -> Result<(Option<Duration>, Duration), HogError> {
        if !(1..=MAX_SIZE).contains(&self.size) {
            return Err(HogError::Invalid(format!(
                "--size must be 1 to {MAX_SIZE}, got {}",
                self.size
            )));
        }
        if !(0.0..=1.0).contains(&self.duty) {
            return Err(HogError::Invalid(format!(
                "--duty must be in [0, 1], got {}",
                self.duty
            )));
        }
        if self.period.is_zero() || self.period > Self::MAX_PERIOD {
            return Err(HogError::Invalid(format!(
                "the period must be positive and at most {} s, got {:?}",
                Self::MAX_PERIOD.as_secs(),
                self.period
            )));
        }
        let run = self
            .seconds
            .map(|s| duration_of("--duration", s))
            .transpose()?;
        let every = duration_of("--report-every", self.report_every_s)?;
        if every.is_zero() {
            return Err(HogError::Invalid(
                "--report-every must be longer than zero".into(),
            ));
        }
        Ok((run, every))
    }

    /// Floating-point operations of one GEMM: 2 n^3.
    pub fn flops_per_gemm(&self) -> f64 {
        2.0 * (self.size as f64).powi(3)
    }
}

/// Runs the GPU hog until `config.seconds` pass or `stop` is set, calling `emit` with the
/// `started` line (after allocation, a warm-up GEMM and calibration), a `report` line every
/// `config.report_every_s`, and returning the `summary` line (which it does not emit).
///
/// Errors, before any line is emitted, for an invalid config, no driver or device
/// ([`HogError::Gpu`], whose text starts "gpu:N: open failed: no CUDA driver found" without a
/// driver), no cuBLAS ([`HogError::NoCublas`]); and at any time for a failing driver or cuBLAS
/// call.
pub fn run(
    config: &GpuHogConfig,
    stop: &StopFlag,
    emit: &mut dyn FnMut(&HogLine),
) -> Result<HogLine, HogError> {
    let began = Instant::now();
    let (run_for, every) = config.validate()?;
    let gpu: Arc<dyn Gpu> = CudaGpu::open(config.gpu)?;
    // Found (with cuBLASLt) and loaded first, so cudarc's dlopen by name resolves to it; cudarc
    // panics on the first cuBLAS call when it cannot be loaded, so this comes first.
    let cublas = kplace_cuda_libs::find(kplace_cuda_libs::Library::Cublas);
    // SAFETY: only tries to load the library (dlopen, then dlclose).
    if !unsafe { blas_sys::is_culib_present() } {
        return Err(HogError::NoCublas(cublas.not_found_message()));
    }
    match catch_unwind(AssertUnwindSafe(|| {
        run_on(&gpu, config, (began, run_for, every), stop, emit)
    })) {
        Ok(result) => result,
        Err(panic) => Err(HogError::Cublas {
            gpu: config.gpu,
            call: "loading cuBLAS".into(),
            status: format!("cudarc panicked: {}", panic_text(&*panic)),
        }),
    }
}

/// Device memory, a stream and a cuBLAS handle bound to it. Dropping it drains the stream
/// and destroys the handle; the stream and then the memory release themselves (field order).
struct Resources {
    gpu: Arc<dyn Gpu>,
    stream: OwnedStream,
    buffers: Vec<GpuMemory>,
    handle: blas_sys::cublasHandle_t,
}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: the stream came from this device; nothing else uses these resources.
        // Failures here mean a broken context, which nothing can repair at this point.
        let _ = unsafe { self.gpu.synchronize(self.stream.raw()) };
        if !self.handle.is_null() {
            // SAFETY: created by create_handle and not destroyed before.
            let _ = unsafe { blas::destroy_handle(self.handle) };
        }
    }
}

impl Resources {
    /// The GEMM's three n x n buffers on `gpu` (the inputs set to 0.5), a stream, and a cuBLAS
    /// handle on it.
    fn new(gpu: &Arc<dyn Gpu>, config: &GpuHogConfig) -> Result<Resources, HogError> {
        let n = config.size;
        let label = format!("gpu:{}", config.gpu);
        let cublas_err = |call: &str| {
            let call = call.to_string();
            move |e: blas::CublasError| HogError::Cublas {
                gpu: config.gpu,
                call,
                status: format!("{:?}", e.0),
            }
        };
        gpu.bind_thread()?;
        let bytes = n * n * size_of::<f32>();
        let buffers = (0..3)
            .map(|_| GpuMemory::new(gpu, MemoryKind::Device, bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let mut res = Resources {
            gpu: Arc::clone(gpu),
            stream: OwnedStream::new(gpu, 0)?,
            buffers,
            handle: ptr::null_mut(),
        };
        let stream = res.stream.raw();
        for buffer in res.buffers[..2].iter().map(GpuMemory::ptr) {
            // SAFETY: a live allocation of n*n f32 words on this device, and this device's stream.
            unsafe {
                cu::cuMemsetD32Async(
                    buffer.addr() as cu::CUdeviceptr,
                    0.5f32.to_bits(),
                    n * n,
                    stream.0.cast(),
                )
            }
            .result()
            .map_err(|e| {
                GpuError::new(
                    label.clone(),
                    format!("cuMemsetD32Async({} words)", n * n),
                    format!("{:?}", e.0),
                )
            })?;
        }
        res.handle = blas::create_handle().map_err(cublas_err("cublasCreate"))?;
        // SAFETY: a live handle and a stream of the context current on this thread.
        unsafe { blas::set_stream(res.handle, stream.0.cast()) }
            .map_err(cublas_err("cublasSetStream"))?;
        Ok(res)
    }
}

fn run_on(
    gpu: &Arc<dyn Gpu>,
    config: &GpuHogConfig,
    (began, run_for, every): (Instant, Option<Duration>, Duration),
    stop: &StopFlag,
    emit: &mut dyn FnMut(&HogLine),
) -> Result<HogLine, HogError> {
    let n = config.size;
    let res = Resources::new(gpu, config)?;
    let stream = res.stream.raw();

    let [a, b, c] = [0, 1, 2].map(|i| res.buffers[i].ptr());
    let side = i32::try_from(n).map_err(|_| HogError::Invalid(format!("--size {n} too large")))?;
    let gemm = || {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: a, b, c hold n*n f32 each and live until `res` drops (after the stream
        // drains); alpha and beta are host values read during the call (pointer mode host,
        // cuBLAS's default).
        unsafe {
            blas::sgemm(
                res.handle,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                side,
                side,
                side,
                &alpha,
                a.cast::<f32>().cast_const(),
                side,
                b.cast::<f32>().cast_const(),
                side,
                &beta,
                c.cast::<f32>(),
                side,
            )
        }
        .map_err(|e| HogError::Cublas {
            gpu: config.gpu,
            call: format!("cublasSgemm({n} x {n})"),
            status: format!("{:?}", e.0),
        })
    };
    let sync = || {
        // SAFETY: `stream` came from this device and lives until the end of this function.
        unsafe { gpu.synchronize(stream) }
    };

    // Warm-up (cuBLAS picks and loads its kernel), then one timed GEMM sizes the batches.
    gemm()?;
    sync()?;
    let t0 = Instant::now();
    gemm()?;
    sync()?;
    // Seconds per GEMM, kept current from every batch (clocks and contention change it).
    let mut per_gemm = t0.elapsed().as_secs_f64().max(1e-9);

    let line = |event: HogEvent, seconds: f64| {
        let mut l = HogLine::new(HogKind::Gpu, event, seconds);
        l.duty = Some(config.duty);
        l.size = Some(n);
        l.gpu = Some(config.gpu);
        l
    };
    let rated = |event: HogEvent, seconds: f64, gemms: u64, busy: Duration| {
        let mut l = line(event, seconds);
        let flops = gemms as f64 * config.flops_per_gemm();
        l.gemms = Some(gemms);
        l.tflops = Some(if seconds > 0.0 {
            flops / seconds / 1e12
        } else {
            0.0
        });
        let busy = busy.as_secs_f64();
        l.busy_tflops = Some(if busy > 0.0 { flops / busy / 1e12 } else { 0.0 });
        l
    };

    let start = Instant::now();
    emit(&line(HogEvent::Started, (start - began).as_secs_f64()));
    let deadline = run_for.map(|d| start + d);
    let busy_part = config.period.mul_f64(config.duty);
    let (mut total_gemms, mut total_busy) = (0u64, Duration::ZERO);
    let (mut report_at, mut report_gemms, mut report_busy) = (start, 0u64, Duration::ZERO);
    let mut period_start = start;
    let stopped_by = 'run: loop {
        // Busy phase: batches until `duty` of the period has passed.
        let busy_end = period_start + busy_part;
        let end = deadline.map_or(busy_end, |d| d.min(busy_end));
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if let Some(why) = stop.reason() {
                break 'run why;
            }
            // About BATCH_TARGET of work, but never far past the phase's end.
            let target = BATCH_TARGET.as_secs_f64().min((end - now).as_secs_f64());
            let k = ((target / per_gemm).ceil() as u64).clamp(1, MAX_BATCH);
            let t = Instant::now();
            for _ in 0..k {
                gemm()?;
            }
            sync()?;
            let spent = t.elapsed();
            per_gemm = (spent.as_secs_f64() / k as f64).max(1e-9);
            total_gemms += k;
            report_gemms += k;
            total_busy += spent;
            report_busy += spent;
        }
        // Idle phase, then the next period.
        let next_period = period_start + config.period;
        let wake = deadline.map_or(next_period, |d| d.min(next_period));
        if sleep_until(wake, stop) {
            break stop.reason().unwrap_or(StopReason::Signal);
        }
        let now = Instant::now();
        if now >= report_at + every {
            emit(&rated(
                HogEvent::Report,
                (now - report_at).as_secs_f64(),
                report_gemms,
                report_busy,
            ));
            (report_at, report_gemms, report_busy) = (now, 0, Duration::ZERO);
        }
        if deadline.is_some_and(|d| now >= d) {
            break StopReason::Time;
        }
        // A period that overran (a batch past its end) starts the next one now.
        period_start = next_period.max(now);
    };
    let elapsed = start.elapsed().as_secs_f64();
    let mut summary = rated(HogEvent::Summary, elapsed, total_gemms, total_busy);
    summary.stopped_by = Some(stopped_by);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GpuHogConfig {
        GpuHogConfig {
            gpu: 0,
            size: 256,
            duty: 1.0,
            period: GpuHogConfig::DEFAULT_PERIOD,
            seconds: Some(0.1),
            report_every_s: 1.0,
        }
    }

    #[test]
    fn invalid_settings_are_rejected_before_touching_the_gpu() {
        for bad in [
            GpuHogConfig {
                size: 0,
                ..config()
            },
            GpuHogConfig {
                size: MAX_SIZE + 1,
                ..config()
            },
            GpuHogConfig {
                duty: 1.5,
                ..config()
            },
            GpuHogConfig {
                duty: f64::NAN,
                ..config()
            },
            GpuHogConfig {
                period: Duration::ZERO,
                ..config()
            },
            GpuHogConfig {
                seconds: Some(-1.0),
                ..config()
            },
            GpuHogConfig {
                report_every_s: 0.0,
                ..config()
            },
        ] {
            let err = run(&bad, &StopFlag::new(), &mut |_| {}).expect_err("invalid");
            assert!(matches!(err, HogError::Invalid(_)), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_gemm_counts_two_n_cubed_flops() {
        assert_eq!(config().flops_per_gemm(), 2.0 * 256.0 * 256.0 * 256.0);
    }
}
