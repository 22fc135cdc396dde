//! [`Stage`]: a kernel's configuration in the tests' terms, and the ABI's raw configuration
//! made of it.

use std::ffi::CString;

use kplace_abi::export::Config;
use kplace_abi::{KernelConfig, MemorySpace, Param, SPLIT_NONE, TensorDesc};

/// The stage's configuration in the tests' terms.
#[derive(Clone)]
pub struct Stage<'a> {
    pub params: &'a [(&'a str, &'a str)],
    pub inputs: Vec<TensorDesc>,
    pub outputs: Vec<TensorDesc>,
    pub split: Option<(u32, u64)>,
    pub device: u32,
}

impl<'a> Stage<'a> {
    pub fn new(input: TensorDesc, output: TensorDesc) -> Stage<'a> {
        Stage {
            params: &[],
            inputs: vec![input],
            outputs: vec![output],
            split: None,
            device: 0,
        }
    }

    pub fn params(mut self, params: &'a [(&'a str, &'a str)]) -> Self {
        self.params = params;
        self
    }

    pub fn split(mut self, axis: u32, tile: u64) -> Self {
        self.split = Some((axis, tile));
        self
    }

    pub fn device(mut self, ordinal: u32) -> Self {
        self.device = ordinal;
        self
    }

    /// The stage split along axis 0 into tiles of `tile` rows, or not split when `None`.
    pub fn tiled(self, tile: Option<u64>) -> Self {
        match tile {
            Some(t) => self.split(0, t),
            None => self,
        }
    }

    /// The same stage with every port in `memory`.
    pub fn in_memory(mut self, memory: MemorySpace) -> Self {
        for d in self.inputs.iter_mut().chain(self.outputs.iter_mut()) {
            d.memory = memory;
        }
        self
    }
}

impl Stage<'_> {
    /// Calls `f` with the stage as the ABI's raw configuration, which lives through the call.
    pub fn with_raw<R>(&self, f: impl FnOnce(&KernelConfig) -> R) -> R {
        let names: Vec<CString> = self
            .params
            .iter()
            .map(|(n, _)| CString::new(*n).unwrap())
            .collect();
        let values: Vec<CString> = self
            .params
            .iter()
            .map(|(_, v)| CString::new(*v).unwrap())
            .collect();
        let params: Vec<Param> = names
            .iter()
            .zip(&values)
            .map(|(n, v)| Param {
                name: n.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let (split_axis, tile) = self.split.unwrap_or((SPLIT_NONE, 0));
        let config = KernelConfig {
            params: if params.is_empty() {
                std::ptr::null()
            } else {
                params.as_ptr()
            },
            inputs: self.inputs.as_ptr(),
            outputs: self.outputs.as_ptr(),
            n_params: params.len() as u32,
            n_inputs: self.inputs.len() as u32,
            n_outputs: self.outputs.len() as u32,
            split_axis,
            tile,
            device_ordinal: self.device,
            reserved: 0,
        };
        f(&config)
    }

    /// Calls `f` with the stage as a kernel's `create` sees it (for a kernel's plan, built
    /// without the kernel's library table).
    pub fn with_config<R>(&self, f: impl FnOnce(&Config<'_>) -> R) -> R {
        self.with_raw(|raw| {
            // SAFETY: every pointer in `raw` points into this stage and the strings
            // `with_raw` keeps alive through the call.
            let config = unsafe { Config::from_raw(raw) }.expect("a well-formed configuration");
            f(&config)
        })
    }
}
