//! `blocks.convert`'s ports: any numeric type in, single-precision floats out.

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, Element};

use crate::ports::{Rows, finite};

/// What `blocks.convert` checks at create.
#[derive(Clone, Copy, Debug)]
pub struct ConvertPorts {
    /// The ports and the split.
    pub rows: Rows,
    /// The input's element type.
    pub from: Element,
    /// Whether the output is complex (`cf32`).
    pub complex: bool,
    /// The factor every part is multiplied by.
    pub scale: f64,
}

impl ConvertPorts {
    /// Checks parameter `scale` and the ports by `rule`: a complex input converts to `cf32`,
    /// a real one to `f32` or `cf32`.
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["scale"])?;
        let input = config
            .inputs()
            .first()
            .ok_or_else(|| KernelError::invalid("input 0 is missing"))?;
        let from = input.dtype.element().ok_or_else(|| {
            KernelError::invalid(format!(
                "input 0 must be numbers (ci8, ci16, cf16, cf32, cf64, i8, i16, i32, f16, bf16, f32 \
                 or f64), got {}",
                describe(input)
            ))
        })?;
        let to = match config.outputs().first().map(|d| d.dtype) {
            Some(Dtype::F32) if from.complex => {
                return Err(KernelError::invalid(format!(
                    "output 0 must be cf32: input 0 is complex ({})",
                    describe(input)
                )));
            }
            Some(Dtype::F32) => Dtype::F32,
            _ => Dtype::CF32,
        };
        Ok(Self {
            rows: Rows::check(config, rule, input.dtype, to, false)?,
            from,
            complex: to == Dtype::CF32,
            scale: finite(config, "scale", 1.0)?,
        })
    }
}
