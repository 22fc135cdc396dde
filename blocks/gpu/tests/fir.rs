//! `blocks.fir` on CUDA, its launch sequence on the host simulator frame after frame with the
//! carry kept between launches as the runtime keeps it, against the CPU block library's
//! `blocks.fir` fed the same frames: equal bit for bit over the whole stream (which the CPU
//! library's own tests prove equal to one long convolution), with frames lost on the way
//! (zero-filled by both), with the stream carried and without, for complex and real samples,
//! across decimations, lanes, and filters shorter and longer than a frame.

mod common;

use common::{at, plan, scratch};
use kplace_abi::export::kernel_entry;
use kplace_abi::{Dtype, Kernel, MemorySpace};
use kplace_blocks_gpu::fir::FirPlan;
use kplace_cuda_hostsim::HostQueue;
use kplace_testkit::abi::{Buffer, Carry, Stage, create, desc, random_f32, rng};

static CPU_FIR: Kernel = kernel_entry::<kplace_blocks::Fir>();

/// One case: the frame's dimensions, the time axis, whether complex, taps, decimation.
struct Case {
    dims: &'static [u64],
    axis: usize,
    complex: bool,
    taps: usize,
    decimation: u64,
}

#[test]
fn the_cuda_fir_equals_the_cpu_fir_over_a_stream_with_losses() {
    let cases = [
        // One lane of 64 samples, 32 taps (the example's filter), decimated by 4.
        Case {
            dims: &[64],
            axis: 0,
            complex: true,
            taps: 32,
            decimation: 4,
        },
        // Eight channels as lanes, time along axes 0 and 1: the beamformer's layout.
        Case {
            dims: &[4, 16, 8],
            axis: 1,
            complex: true,
            taps: 32,
            decimation: 4,
        },
        // A filter longer than a frame: the history spans several frames.
        Case {
            dims: &[8, 3],
            axis: 0,
            complex: false,
            taps: 21,
            decimation: 2,
        },
        // One tap: no history at all.
        Case {
            dims: &[6, 2],
            axis: 0,
            complex: false,
            taps: 1,
            decimation: 3,
        },
    ];
    let queue = HostQueue::new();
    for (c, case) in cases.iter().enumerate() {
        let dtype = if case.complex {
            Dtype::CF32
        } else {
            Dtype::F32
        };
        let parts = if case.complex { 2 } else { 1 };
        let samples: u64 = case.dims[..=case.axis].iter().product();
        let lanes: u64 = case.dims[case.axis + 1..].iter().product();
        let out = [samples / case.decimation, lanes];
        let taps = random_f32(&mut rng(100 + c as u64), case.taps, -0.5, 0.5);
        let taps: Vec<String> = taps.iter().map(|t| format!("{t:e}")).collect();
        let (taps, axis, decimation) = (
            taps.join(", "),
            case.axis.to_string(),
            case.decimation.to_string(),
        );
        for stream in ["true", "false"] {
            let params = [
                ("taps", taps.as_str()),
                ("axis", axis.as_str()),
                ("decimation", decimation.as_str()),
                ("stream", stream),
            ];
            let stage = Stage::new(desc(dtype, case.dims), desc(dtype, &out)).params(&params);
            let reference = create(&CPU_FIR, &stage).expect("CPU create");
            let mut cpu_carry = Carry::new(reference.carry_bytes());
            let p = plan(&stage, FirPlan::from_config).unwrap();
            assert_eq!(p.spec().history.carry_bytes(), reference.carry_bytes());
            let carry = scratch(p.spec().history.carry_bytes());
            let workspace = scratch(p.layout().bytes());
            let mut rng = rng(200 + c as u64);
            let mut missing = 0;
            for frame in 0..40u64 {
                // Frames 7, 8 and 23 are lost: both sides hear of them at the next launch.
                if [7, 8, 23].contains(&frame) {
                    missing += 1;
                    continue;
                }
                let len = (samples * lanes) as usize * parts;
                let x = Buffer::from_f32(case.dims, dtype, &random_f32(&mut rng, len, -1.0, 1.0));
                let mut want = Buffer::new(dtype, &out);
                reference
                    .launch_frame(
                        x.input(MemorySpace::HOST),
                        want.output(MemorySpace::HOST),
                        &mut cpu_carry,
                        frame,
                        missing,
                    )
                    .expect("CPU launch");
                let got = Buffer::new(dtype, &out);
                let carry_at = if p.spec().history.carried {
                    at(&carry)
                } else {
                    0
                };
                // SAFETY: host buffers of the stage's sizes stand in for device memory; the
                // carry and workspace are as large as the plan asks.
                unsafe {
                    p.enqueue(
                        &queue,
                        at(&x),
                        at(&got),
                        at(&Buffer::from_f32(
                            &[case.taps as u64],
                            Dtype::F32,
                            &p.spec().taps,
                        )),
                        (at(&workspace), p.layout().bytes()),
                        carry_at,
                        missing,
                    )
                }
                .unwrap();
                assert_eq!(
                    got.bits(),
                    want.bits(),
                    "case {c}, stream {stream}, frame {frame} after {missing} lost"
                );
                missing = 0;
            }
        }
    }
}

#[test]
fn a_carried_history_needs_a_carry() {
    let params = [("taps", "0.5, 0.25, 0.25")];
    let stage = Stage::new(desc(Dtype::F32, &[8]), desc(Dtype::F32, &[8])).params(&params);
    let p = plan(&stage, FirPlan::from_config).unwrap();
    let (x, y) = (scratch(32), scratch(32));
    let workspace = scratch(p.layout().bytes());
    // SAFETY: host buffers of the stage's sizes stand in for device memory.
    let refused = unsafe {
        p.enqueue(
            &HostQueue::new(),
            at(&x),
            at(&y),
            at(&x),
            (at(&workspace), p.layout().bytes()),
            0,
            0,
        )
    }
    .unwrap_err();
    assert!(refused.message.contains("no carry"), "{}", refused.message);
}
