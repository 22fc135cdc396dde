//! The radar's CPU path allocates nothing per frame: the executor (source, workers,
//! collector) and the FFTW kernels run a steady stream of frames without touching the heap.
//! Counted by a process-wide counting allocator between the 100th frame handed to the sink and
//! the 400th; building the plan, the pools and the first frames (warm-up) are left out.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::files::GraphFiles;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
use kplace_radar::scene::{Scene, SceneConfig};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers every operation to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Counts frames, and the allocations between the window's first and last frame.
struct Window {
    frames: u64,
    first: u64,
    last: u64,
    at_first: u64,
    during: Option<u64>,
}

impl FrameSink for Window {
    fn frame(&mut self, _frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.frames += 1;
        if self.frames == self.first {
            self.at_first = ALLOCATIONS.load(Ordering::Relaxed);
        } else if self.frames == self.last {
            self.during = Some(ALLOCATIONS.load(Ordering::Relaxed) - self.at_first);
        }
        Ok(())
    }

    fn partial(&mut self, _frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed("a replayed frame cannot be partial"))
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The radar on `workloads/radar/placements/all-cpu.yaml` at 512x64 with `workers` and `slots`.
fn plan(workers: usize, slots: usize) -> Plan {
    let cpi = "512x64".parse().unwrap();
    let files = GraphFiles {
        workers: Some(workers),
        slots: Some(slots),
        ..GraphFiles::read(
            &workspace().join("workloads/radar/graph.yaml"),
            &workspace().join("workloads/radar/placements/all-cpu.yaml"),
        )
        .unwrap()
    };
    let (graph, placement) = kplace_radar::graph::load_files(&files, cpi, &[]).unwrap();
    Plan::new(graph, placement).unwrap()
}

#[test]
fn a_steady_stream_of_frames_allocates_nothing_on_the_cpu_path() {
    let scene = Scene::new(SceneConfig::new("512x64".parse().unwrap())).unwrap();
    let frames = kplace_radar::graph::prepare_frames(&scene, 4).unwrap();
    // The counter itself works.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    drop(std::hint::black_box(vec![1u8; 16]));
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > before);
    for (workers, slots) in [(1, 1), (1, 4), (2, 4)] {
        let plan = plan(workers, slots);
        let mut source = FrameReplay::new(frames.clone(), 500);
        let mut window = Window {
            frames: 0,
            first: 100,
            last: 400,
            at_first: 0,
            during: None,
        };
        executor::run(&plan, &mut source, &mut window).unwrap();
        assert_eq!(window.frames, 500);
        assert_eq!(
            window.during,
            Some(0),
            "{workers} worker(s), {slots} slot(s): allocations between frames 100 and 400"
        );
    }
}
