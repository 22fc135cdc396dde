//! `blocks.transpose`: a tensor's axes reordered.
//!
//! - Input 0: any numeric dtype, any shape. Output 0: the same dtype, the input's dimensions
//!   in the order of `axes`: output axis `a` is input axis `axes[a]`, as NumPy's
//!   `x.transpose(axes)` (made contiguous).
//! - Parameter `axes`: a permutation of the input's axes, a list; default their reverse (a
//!   matrix's transpose). Every element is copied, bits unchanged.
//! - Not split: a tile of the input's axis 0 is no tile of the output. No workspace.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, Tensor};
use kplace_blocks_contract::names;
use kplace_blocks_contract::transpose::Transpose as Spec;

use crate::layout::PORTS;

/// The `blocks.transpose` state.
#[derive(Debug)]
pub struct Transpose(Spec);

impl Transpose {
    /// Copies every element of `input` to its place in `output`, elements being `T`s.
    fn permute<T: Copy>(&self, input: &Tensor, output: &Tensor) -> Result<(), KernelError> {
        let spec = &self.0;
        // SAFETY: an unsplit stage reads its whole input, complete, and writes its whole
        // output alone; both hold `elements` values of T's size, aligned for it.
        let (x, y) = unsafe {
            (
                input.host_range::<T>(0..spec.elements)?,
                output.host_range_mut::<T>(0..spec.elements)?,
            )
        };
        let (dims, strides) = (spec.dims(), &spec.strides);
        let last = dims.len() - 1;
        // The output in order, its index an odometer over its dimensions and `from` the
        // input's offset of the same element.
        let mut index = [0u64; kplace_abi::MAX_RANK];
        let mut from = 0u64;
        for y in y.iter_mut() {
            *y = x[from as usize];
            let mut a = last;
            index[a] += 1;
            from += strides[a];
            while index[a] == dims[a] && a > 0 {
                from -= dims[a] * strides[a];
                index[a] = 0;
                a -= 1;
                index[a] += 1;
                from += strides[a];
            }
        }
        Ok(())
    }
}

impl KernelImpl for Transpose {
    const NAME: &'static CStr = names::TRANSPOSE;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        Spec::check(config, &PORTS).map(Self)
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.0.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.0.output)?;
        match self.0.element_bytes {
            1 => self.permute::<u8>(input, output),
            2 => self.permute::<u16>(input, output),
            4 => self.permute::<u32>(input, output),
            8 => self.permute::<u64>(input, output),
            _ => self.permute::<[u64; 2]>(input, output),
        }
    }
}
