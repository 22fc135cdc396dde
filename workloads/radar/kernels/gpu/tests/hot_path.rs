//! The GPU hot path: what a frame enqueues, and that enqueueing it allocates nothing.
//!
//! - Launch counts: the three stages' plans, built from configs as `create` builds them,
//!   enqueue a 4096x512 frame on a queue that counts. At the GPU's default tile (a quarter of
//!   the chirps: 128) a frame costs 15 enqueues (kernel launches plus cuFFT executions):
//!   range 4 tiles x 2, Doppler 3, CFAR 4, within the budget of 16. Unsplit and at tile 16
//!   show how the range stage scales (2 per tile).
//! - No allocation: each stage's port checks (what `launch` runs before enqueueing) and
//!   `enqueue`, run many times on the counting queue under a counting global allocator,
//!   allocate nothing after the first frame.
//!
//! No GPU is needed: the counting queue runs nothing, so the addresses are never touched.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;

use common::{CountingQueue, Setup, desc};
use kplace_abi::export::Launch;
use kplace_abi::{Dtype, LaunchArgs, Tensor, TensorDesc, Tile};
use kplace_gpu::cfar::CfarPlan;
use kplace_gpu::doppler_fft::DopplerFftPlan;
use kplace_gpu::range_fft::RangeFftPlan;
use kplace_gpu::source::Function;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers every operation to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Device addresses for the counting queue: aligned, never dereferenced.
const IQ: u64 = 0x7100_0000_0000;
const MAP: u64 = 0x7200_0000_0000;
const POWER: u64 = 0x7300_0000_0000;
const LIST: u64 = 0x7400_0000_0000;
const WINDOW: u64 = 0x7500_0000_0000;
const WORKSPACE: u64 = 0x7600_0000_0000;
/// cuFFT's work area, as a plan might ask for it.
const FFT_WORK: u64 = 1 << 20;

/// The all-GPU frame's three stages at N samples x M chirps, the range stage split into tiles
/// of `tile` chirps (or unsplit).
struct Frame {
    chirps: u64,
    tile: Option<u64>,
    descs: [TensorDesc; 4],
    range: RangeFftPlan,
    doppler: DopplerFftPlan,
    cfar: CfarPlan,
}

/// What each stage enqueued, kernel launches plus FFT executions.
#[derive(Debug, PartialEq, Eq)]
struct Enqueues {
    range: u64,
    doppler: u64,
    cfar: u64,
}

impl Enqueues {
    fn total(&self) -> u64 {
        self.range + self.doppler + self.cfar
    }
}

impl Frame {
    fn new(samples: u64, chirps: u64, tile: Option<u64>) -> Self {
        let iq = desc(Dtype::CI16, &[chirps, samples]);
        let map = desc(Dtype::CF32, &[samples, chirps]);
        let power = desc(Dtype::F32, &[samples, chirps]);
        let list = desc(Dtype::RECORDS, &[16384]);
        let range = Setup::split(&[], &[iq], &[map], tile.map(|t| (0, t)));
        let doppler = Setup::new(&[], &[map], &[power]);
        let cfar = Setup::new(&[], &[power], &[list]);
        Self {
            chirps,
            tile,
            descs: [iq, map, power, list],
            range: RangeFftPlan::from_config(&range.config()).expect("range plan"),
            doppler: DopplerFftPlan::from_config(&doppler.config()).expect("Doppler plan"),
            cfar: CfarPlan::from_config(&cfar.config()).expect("CFAR plan"),
        }
    }

    /// The tiles the runtime launches the range stage over.
    fn range_tiles(&self) -> impl Iterator<Item = Tile> {
        let size = self.tile.unwrap_or(self.chirps);
        (0..self.chirps / size).map(move |t| Tile {
            begin: t * size,
            count: size,
        })
    }

    /// Runs `f` on a launch of one input and one output at the given addresses, as the
    /// runtime passes it.
    fn with_launch<R>(
        ports: [(TensorDesc, u64); 2],
        workspace_bytes: u64,
        tile: Tile,
        f: impl FnOnce(&Launch<'_>) -> R,
    ) -> R {
        let tensor = |(desc, at): (TensorDesc, u64)| Tensor {
            desc,
            data: at as *mut c_void,
        };
        let (inputs, outputs) = ([tensor(ports[0])], [tensor(ports[1])]);
        let args = LaunchArgs {
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_inputs: 1,
            n_outputs: 1,
            workspace: WORKSPACE as *mut c_void,
            workspace_bytes,
            stream: std::ptr::null_mut(),
            tile,
            ..Default::default()
        };
        // SAFETY: every pointer in `args` points at the arrays above, alive for the call.
        f(&unsafe { Launch::from_raw(&args) })
    }

    /// Enqueues one frame, each stage on its own queue, as `launch` would: port checks, then
    /// the plan's enqueue.
    fn enqueue(&self, queues: &[CountingQueue; 3]) {
        let [iq, map, power, list] = self.descs;
        let range_bytes = self.range.layout(FFT_WORK).bytes();
        for tile in self.range_tiles() {
            Self::with_launch([(iq, IQ), (map, MAP)], range_bytes, tile, |launch| {
                let (input, output) = self.range.ports(launch).expect("range ports");
                // SAFETY: the counting queue dereferences no address.
                unsafe {
                    self.range.enqueue(
                        &queues[0],
                        input,
                        output,
                        WINDOW,
                        WORKSPACE,
                        launch.workspace_bytes(),
                        FFT_WORK,
                        launch.tile(),
                    )
                }
                .expect("range enqueue");
            });
        }
        let whole = |len| Tile {
            begin: 0,
            count: len,
        };
        let doppler_bytes = self.doppler.layout(FFT_WORK).bytes();
        let ports = [(map, MAP), (power, POWER)];
        Self::with_launch(ports, doppler_bytes, whole(map.shape[0]), |launch| {
            let (input, output) = self.doppler.ports(launch).expect("Doppler ports");
            // SAFETY: as above.
            unsafe {
                self.doppler.enqueue(
                    &queues[1],
                    input,
                    output,
                    WINDOW,
                    WORKSPACE,
                    launch.workspace_bytes(),
                    FFT_WORK,
                )
            }
            .expect("Doppler enqueue");
        });
        let cfar_bytes = self.cfar.layout().bytes();
        let ports = [(power, POWER), (list, LIST)];
        Self::with_launch(ports, cfar_bytes, whole(power.shape[0]), |launch| {
            let (input, output) = self.cfar.ports(launch).expect("CFAR ports");
            // SAFETY: as above.
            unsafe {
                self.cfar.enqueue(
                    &queues[2],
                    input,
                    output,
                    WORKSPACE,
                    launch.workspace_bytes(),
                )
            }
            .expect("CFAR enqueue");
        });
    }

    /// One frame's enqueues per stage, with the kernels each stage launched checked.
    fn count(&self) -> Enqueues {
        let queues = [
            CountingQueue::new(),
            CountingQueue::new(),
            CountingQueue::new(),
        ];
        self.enqueue(&queues);
        let [range, doppler, cfar] = &queues;
        let tiles = self.range_tiles().count() as u64;
        assert_eq!(range.launches_of(Function::RangeWindow), tiles);
        assert_eq!((range.launches(), range.ffts()), (tiles, tiles));
        assert_eq!(doppler.launches_of(Function::DopplerWindow), 1);
        assert_eq!(doppler.launches_of(Function::Power), 1);
        assert_eq!(doppler.ffts(), 1);
        for function in [
            Function::CfarRows,
            Function::CfarDetect,
            Function::CfarScan,
            Function::CfarScatter,
        ] {
            assert_eq!(cfar.launches_of(function), 1, "{function:?}");
        }
        assert_eq!(cfar.ffts(), 0);
        Enqueues {
            range: range.enqueues(),
            doppler: doppler.enqueues(),
            cfar: cfar.enqueues(),
        }
    }
}

#[test]
fn a_4096x512_frame_at_the_gpu_default_tile_enqueues_at_most_16() {
    let (samples, chirps) = (4096, 512);
    let default_tile = chirps / 4;
    let at_default = Frame::new(samples, chirps, Some(default_tile)).count();
    assert_eq!(
        at_default,
        Enqueues {
            range: 8,
            doppler: 3,
            cfar: 4
        }
    );
    assert_eq!(at_default.total(), 15);
    assert!(at_default.total() <= 16);

    // How the range stage scales: two enqueues per tile.
    let unsplit = Frame::new(samples, chirps, None).count();
    assert_eq!(
        unsplit,
        Enqueues {
            range: 2,
            doppler: 3,
            cfar: 4
        }
    );
    assert_eq!(unsplit.total(), 9);
    let small_tiles = Frame::new(samples, chirps, Some(16)).count();
    assert_eq!(
        small_tiles,
        Enqueues {
            range: 64,
            doppler: 3,
            cfar: 4
        }
    );
    assert_eq!(small_tiles.total(), 71);
}

#[test]
fn enqueueing_frames_allocates_nothing() {
    // The counter itself works.
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8]))) > 0);
    for (samples, chirps, tile) in [
        (4096, 512, Some(128)),
        (4096, 512, None),
        (1024, 128, Some(16)),
        (1024, 128, Some(1)),
    ] {
        let frame = Frame::new(samples, chirps, tile);
        let queues = [
            CountingQueue::new(),
            CountingQueue::new(),
            CountingQueue::new(),
        ];
        frame.enqueue(&queues);
        let frames = 200;
        let n = allocations_during(|| {
            for _ in 0..frames {
                frame.enqueue(&queues);
            }
        });
        assert_eq!(n, 0, "{samples}x{chirps} tile {tile:?}: {n} allocations");
        let per_frame = frame.count().total();
        let enqueued: u64 = queues.iter().map(CountingQueue::enqueues).sum();
        assert_eq!(enqueued, (frames + 1) * per_frame);
    }
}
