//! One state of a Python kernel: made by host.py's `create` from the stage's configuration, and
//! launched by its `launch` on views of the runtime's buffers, the GIL held for the call.

use std::mem::ManuallyDrop;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use kplace_abi::export::{Config, KernelError, Launch};
use std::ffi::CString;

use kplace_abi::{KernelFlags, TensorDesc};

use crate::arrays::{Access, view};
use crate::glue::{describe_error, host};

/// One kernel a module declares.
#[derive(Debug)]
pub struct Declared {
    /// Its logical name.
    pub name: CString,
    /// Inputs it takes.
    pub n_inputs: u32,
    /// Outputs it writes.
    pub n_outputs: u32,
    /// Stateful, and what a lost frame does to its carry.
    pub flags: KernelFlags,
    /// A class (an instance per state) or a function (called as it is).
    pub is_class: bool,
    /// The class or function.
    pub object: Py<PyAny>,
}

/// A state: the callable host.py made for one stage and frame slot.
#[derive(Debug)]
pub struct State {
    object: ManuallyDrop<Py<PyAny>>,
    n_inputs: usize,
    n_outputs: usize,
    carry_bytes: u64,
}

/// A port as host.py takes it: kplace's element type, NumPy's, and the array's shape.
fn ports(descs: &[TensorDesc]) -> Vec<(&'static str, &'static str, Vec<u64>)> {
    descs
        .iter()
        .map(|d| {
            let (descr, shape) = kplace_abi::numpy::layout(d.dtype, d.dims(), d.bytes);
            (d.dtype.name().unwrap_or("unknown"), descr, shape)
        })
        .collect()
}

impl State {
    /// Creates a state of `kernel` for `config`: the kernel's own checks, in Python, refuse a
    /// configuration it cannot take.
    pub fn create(kernel: &Declared, config: &Config<'_>) -> Result<State, KernelError> {
        Python::attach(|py| {
            let made = (|| {
                let params = PyDict::new(py);
                for name in config.param_names() {
                    params.set_item(name, config.param(name))?;
                }
                let stateful = kernel.flags.contains(KernelFlags::STATEFUL);
                let state = host(py)?.getattr("create")?.call1((
                    kernel.object.bind(py),
                    kernel.is_class,
                    stateful,
                    params,
                    ports(config.inputs()),
                    ports(config.outputs()),
                    config.split(),
                ))?;
                let carry_bytes: u64 = state.getattr("carry_bytes")?.extract()?;
                Ok(State {
                    object: ManuallyDrop::new(state.unbind()),
                    n_inputs: config.inputs().len(),
                    n_outputs: config.outputs().len(),
                    carry_bytes,
                })
            })();
            made.map_err(|e: PyErr| KernelError::invalid(describe_error(py, &e)))
        })
    }

    /// The bytes it carries from frame to frame.
    pub fn carry_bytes(&self) -> u64 {
        self.carry_bytes
    }

    /// Runs the kernel on one launch's tensors.
    pub fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        if launch.carry_bytes() < self.carry_bytes {
            return Err(KernelError::invalid(format!(
                "carry of {} bytes is smaller than the {} the kernel asked for",
                launch.carry_bytes(),
                self.carry_bytes
            )));
        }
        let inputs = (0..self.n_inputs)
            .map(|i| launch.input(i))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = (0..self.n_outputs)
            .map(|i| launch.output(i))
            .collect::<Result<Vec<_>, _>>()?;
        Python::attach(|py| {
            let ran = (|| {
                // The runtime's tensors and carry are valid host memory of their stated
                // sizes for the whole launch (ABI contract), inputs for reads, outputs and the
                // carry for writes; host.py releases every view before it returns, and fails
                // the launch when the kernel still holds one.
                let ins = inputs
                    .iter()
                    // SAFETY: an input, for reads, as above.
                    .map(|t| unsafe { view(py, t.data, t.desc.bytes, Access::Read) })
                    .collect::<PyResult<Vec<_>>>()?;
                let outs = outputs
                    .iter()
                    // SAFETY: an output, for writes, as above.
                    .map(|t| unsafe { view(py, t.data, t.desc.bytes, Access::Write) })
                    .collect::<PyResult<Vec<_>>>()?;
                let carry = match self.carry_bytes {
                    0 => None,
                    // SAFETY: as above, for the carry.
                    bytes => Some(unsafe { view(py, launch.carry(), bytes, Access::Write) }?),
                };
                let tile = launch.tile();
                host(py)?.getattr(pyo3::intern!(py, "launch"))?.call1((
                    self.object.bind(py),
                    ins,
                    outs,
                    carry,
                    launch.frame(),
                    launch.frames_missing(),
                    (tile.begin, tile.count),
                ))?;
                Ok(())
            })();
            ran.map_err(|e: PyErr| KernelError::internal(describe_error(py, &e)))
        })
    }
}

impl Drop for State {
    fn drop(&mut self) {
        Python::attach(|_py| {
            // SAFETY: dropped once, here, with the GIL held, so the reference is released now
            // rather than left for a later holder of the GIL.
            unsafe { ManuallyDrop::drop(&mut self.object) }
        });
    }
}
