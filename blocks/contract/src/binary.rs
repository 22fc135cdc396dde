//! `blocks.add` and `blocks.multiply`'s ports: two inputs, element by element, the second
//! repeated over the first's leading axes.

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, TensorDesc};

use crate::ports::{Rows, port};

/// Which operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `x + w`.
    Add,
    /// `x * w`, or `x * conj(w)`.
    Multiply,
}

/// What `blocks.add` and `blocks.multiply` check at create.
#[derive(Clone, Copy, Debug)]
pub struct Binary {
    /// Input 0 and output 0 (the same dtype and dimensions), and the split.
    pub rows: Rows,
    /// Input 1.
    pub other: TensorDesc,
    /// Elements of input 1: element `i` of input 0 meets element `i % other_len` of it.
    pub other_len: usize,
    /// The operation.
    pub op: Op,
    /// Whether input 0 (and the output) is `cf32`.
    pub complex: bool,
    /// Whether input 1 is `cf32`.
    pub other_complex: bool,
    /// `blocks.multiply`'s `conjugate`: input 1's imaginary parts negated.
    pub conjugate: bool,
}

impl Binary {
    /// Checks the parameters (`conjugate` for a product, default false) and the ports by
    /// `rule`: input 0 `cf32` or `f32`, output 0 the same; input 1 the same dtype (or `f32`
    /// times `cf32`), with input 0's last dimensions or a single element. Split along axis 0
    /// in tiles that divide it.
    pub fn check(config: &Config<'_>, rule: &Ports, op: Op) -> Result<Self, KernelError> {
        let conjugate = match op {
            Op::Add => {
                config.reject_unknown_params(&[])?;
                false
            }
            Op::Multiply => {
                config.reject_unknown_params(&["conjugate"])?;
                config.parse_param::<bool>("conjugate")?.unwrap_or(false)
            }
        };
        let dtype = config.inputs().first().map_or(Dtype::CF32, |d| d.dtype);
        if dtype != Dtype::CF32 && dtype != Dtype::F32 {
            return Err(KernelError::invalid(format!(
                "input 0 must be cf32 or f32, got {}",
                dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        let rows = Rows::check(config, rule, dtype, dtype, false)?;
        let other_dtype = config.inputs().get(1).map_or(dtype, |d| d.dtype);
        let allowed = other_dtype == dtype
            || (op == Op::Multiply && dtype == Dtype::CF32 && other_dtype == Dtype::F32);
        let name = dtype.name().unwrap_or("?");
        if !allowed {
            let expected = match op {
                Op::Add => name.to_string(),
                Op::Multiply if dtype == Dtype::CF32 => "cf32 or f32".into(),
                Op::Multiply => "f32 (a real input 0 makes a real output)".into(),
            };
            return Err(KernelError::invalid(format!(
                "input 1 must be {expected}, got {}",
                other_dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        let other = port(rule, config.inputs(), 1, "input 1", other_dtype)?;
        let (dims, w) = (rows.input.dims(), other.dims());
        // Sizes were checked to be addressable, so the count fits usize.
        let other_len = w.iter().product::<u64>() as usize;
        let suffix = w.len() <= dims.len() && dims[dims.len() - w.len()..] == *w;
        if !suffix && other_len != 1 {
            return Err(KernelError::invalid(format!(
                "input 1 must have input 0's last dimensions (for input 0 {}: e.g. {:?} or \
                 {:?}), or hold one value; got {}",
                describe(&rows.input),
                &dims[dims.len() - 1..],
                dims,
                describe(&other)
            )));
        }
        Ok(Self {
            complex: dtype == Dtype::CF32,
            other_complex: other_dtype == Dtype::CF32,
            rows,
            other,
            other_len,
            op,
            conjugate,
        })
    }
}

/// Which of the two blocks, on either library: its name and its operation.
pub trait Which: Send + Sync + 'static {
    /// The block's name.
    const NAME: &'static std::ffi::CStr;
    /// Its operation.
    const OP: Op;
}

/// `x + w`.
#[derive(Debug)]
pub enum Sum {}

impl Which for Sum {
    const NAME: &'static std::ffi::CStr = crate::names::ADD;
    const OP: Op = Op::Add;
}

/// `x * w`.
#[derive(Debug)]
pub enum Product {}

impl Which for Product {
    const NAME: &'static std::ffi::CStr = crate::names::MULTIPLY;
    const OP: Op = Op::Multiply;
}
