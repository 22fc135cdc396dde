//! `kplace.Pipeline`: a graph on a placement, fed NumPy arrays, its sinks returned as arrays;
//! one stream across every call, so a stateful stage's carry goes on from call to call as on a
//! stream. A thin skin over `kplace::workload::feed::Feed`, which plans the graph as `kplace
//! run` does and runs the runtime's own executor.
//!
//! Guarantees: the frames are read in place (no copy but into the frames' slots) and the sinks
//! written straight into the arrays returned; the GIL is released while the frames run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::arrays::{self, Layout};
use crate::errors::kplace_error;
use kplace::workload::feed::{Feed, FeedSpec};

/// A graph on a placement, run on NumPy arrays.
///
/// `Pipeline(graph, placement="cpu", set=None)`: `graph` is a file or a name kplace ships
/// (`"spectrogram"`, `"beamformer/filtered"`), `placement` a file or a name beside the graph,
/// and `set` a dict of dimensions and stage parameters, as `kplace run --set` takes them
/// (`{"C": 8, "lowpass.decimation": 4}`). `process(frames)` runs frames through the stream
/// and returns each sink's frames; `report()` ends the stream and returns its run report.
#[pyclass(frozen, module = "kplace")]
pub struct Pipeline {
    // Dropped with the GIL released (`Drop` below); also in [`OPEN`] until then.
    feed: Arc<Mutex<Feed>>,
    source: Layout,
    sinks: Vec<Layout>,
}

impl Pipeline {
    fn feed(&self) -> MutexGuard<'_, Feed> {
        lock(&self.feed)
    }
}

impl Drop for Pipeline {
    /// Ends the stream with the GIL released: its workers may be waiting for the GIL to run a
    /// kernel written in Python, or to release one's state, and are joined here.
    fn drop(&mut self) {
        let feed = Arc::clone(&self.feed);
        Python::attach(|py| py.detach(move || lock(&feed).close()));
    }
}

fn lock(feed: &Mutex<Feed>) -> MutexGuard<'_, Feed> {
    // A panic inside the feed leaves it failed or ended, which it says on the next call.
    feed.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The feed of every pipeline not yet dropped, for [`close_all`].
static OPEN: Mutex<Vec<Weak<Mutex<Feed>>>> = Mutex::new(Vec::new());

/// Ends the stream of every pipeline still open. Registered with `atexit` when the module is
/// imported: a pipeline still alive when Python exits is otherwise dropped while the
/// interpreter finalizes, when its workers can no longer take the GIL to release a Python
/// kernel's state.
#[pyfunction]
pub fn close_all(py: Python<'_>) {
    let open = std::mem::take(&mut *OPEN.lock().unwrap_or_else(PoisonError::into_inner));
    py.detach(|| {
        for feed in open.iter().filter_map(Weak::upgrade) {
            lock(&feed).close();
        }
    });
}

/// A tensor's layout as Python reads it: name, element types, one frame's shape.
fn describe<'py>(py: Python<'py>, layout: &Layout) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &layout.name)?;
    d.set_item("kplace_dtype", layout.dtype)?;
    d.set_item("dtype", layout.numpy_name(py)?)?;
    d.set_item("shape", pyo3::types::PyTuple::new(py, &layout.shape)?)?;
    Ok(d)
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (graph, placement = None, set = None))]
    fn new(
        py: Python<'_>,
        graph: PathBuf,
        placement: Option<PathBuf>,
        set: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Pipeline> {
        let placement = placement.unwrap_or_else(|| PathBuf::from("cpu"));
        let mut settings = Vec::new();
        for (key, value) in set.into_iter().flat_map(|d| d.iter()) {
            settings.push(format!("{}={}", key.str()?, value.str()?));
        }
        let feed = py
            .detach(|| {
                Feed::open(&FeedSpec {
                    graph: &graph,
                    placement: &placement,
                    settings: &settings,
                })
            })
            .map_err(|e| kplace_error(&e))?;
        let source = Layout::of(feed.source());
        let sinks = feed.sinks().into_iter().map(Layout::of).collect();
        let feed = Arc::new(Mutex::new(feed));
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|f| f.strong_count() > 0);
        open.push(Arc::downgrade(&feed));
        drop(open);
        Ok(Pipeline {
            source,
            sinks,
            feed,
        })
    }

    /// Runs `frames` (one frame of the source tensor, or a stack of them along a first axis)
    /// through the stream and returns a dict of each sink's frames (stacked the same way).
    fn process<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let batch = arrays::frames(py, frames, &self.source)?;
        let mut arrays = Vec::with_capacity(self.sinks.len());
        let mut outputs: Vec<&mut [u8]> = Vec::with_capacity(self.sinks.len());
        for sink in &self.sinks {
            let (array, data) = sink.empty(py, batch.frames, batch.stacked)?;
            let len = batch.frames * sink.bytes;
            outputs.push(match len {
                0 => &mut [],
                // SAFETY: `array` is a new array of exactly `len` bytes at `data` (checked by
                // `Layout::empty`), kept alive in `arrays` until this call returns, and written
                // by nothing else.
                _ => unsafe { std::slice::from_raw_parts_mut(data, len) },
            });
            arrays.push(array);
        }
        let len = batch.frames * self.source.bytes;
        let input: &[u8] = match len {
            0 => &[],
            // SAFETY: `frames` is borrowed for this call and holds `len` bytes at `data`, in
            // place (C-contiguous, its element type and shape checked by `arrays::frames`).
            _ => unsafe { std::slice::from_raw_parts(batch.data, len) },
        };
        let feed = &self.feed;
        py.detach(|| {
            feed.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .process(input, &mut outputs)
        })
        .map_err(|e| kplace_error(&e))?;
        let out = PyDict::new(py);
        for (sink, array) in self.sinks.iter().zip(arrays) {
            out.set_item(&sink.name, array)?;
        }
        Ok(out)
    }

    /// Says that the stream's next `frames` frames were lost (a capture that dropped them):
    /// the next `process` call's frames follow the gap, and each stateful stage meets it by
    /// its kernel's loss rule, as on a stream that lost packets (the FIR's: the lost frames
    /// are silence; the stage's report counts them under `carry.frames_missing`).
    #[pyo3(signature = (frames = 1))]
    fn lose(&self, frames: u64) -> PyResult<()> {
        self.feed().lose(frames).map_err(|e| kplace_error(&e))
    }

    /// Frames said lost so far and followed by frames processed.
    #[getter]
    fn frames_lost(&self) -> u64 {
        self.feed().frames_lost()
    }

    /// The plan, as `kplace plan` prints it: stages, devices, launches, memory.
    fn plan(&self) -> String {
        self.feed().plan().to_string()
    }

    /// Ends the stream (the frames in flight finish) and returns its run report as a dict,
    /// the fields of `kplace run --report` (docs/report.md); the same report once ended.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let feed = &self.feed;
        let json = py.detach(|| {
            let mut feed = feed.lock().unwrap_or_else(PoisonError::into_inner);
            let report = feed.finish().map_err(|e| e.to_string())?;
            serde_json::to_string(report).map_err(|e| e.to_string())
        });
        let json = json.map_err(crate::errors::KplaceError::new_err)?;
        py.import("json")?.getattr("loads")?.call1((json,))
    }

    /// Ends the stream; `report()` still returns its report.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.report(py).map(|_| ())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// The source tensor: `{"name", "kplace_dtype", "dtype", "shape"}` of one frame.
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        describe(py, &self.source)
    }

    /// The sink tensors, in the graph's order, described as `source` is.
    #[getter]
    fn sinks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for sink in &self.sinks {
            list.append(describe(py, sink)?)?;
        }
        Ok(list)
    }

    /// Frames processed so far.
    #[getter]
    fn frames_fed(&self) -> u64 {
        self.feed().frames_fed()
    }

    fn __repr__(&self) -> String {
        let feed = self.feed();
        let plan = feed.plan();
        format!(
            "kplace.Pipeline(graph={:?}, placement={:?}, frames_fed={})",
            plan.graph.name,
            plan.placement.name,
            feed.frames_fed()
        )
    }
}
