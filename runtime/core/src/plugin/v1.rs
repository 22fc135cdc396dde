//! Version 1 libraries' tensors: the runtime speaks version 2 (8 dimensions), a version 1
//! kernel reads `kplace_tensor_desc_v1` and `kplace_tensor_v1` (4), so its descriptors and
//! tensors are copied into that layout for each call, a tensor of more dimensions refused.

use kplace_abi::{
    Dtype, LaunchArgs, MAX_RANK_V1, MemorySpace, Tensor, TensorDesc, TensorDescV1, TensorV1,
};

/// Why tensors do not fit a version 1 kernel's layout.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum V1Misfit {
    /// A descriptor for `create` with more dimensions than version 1 has.
    #[error(
        "{side} {index} has {rank} dimensions, but this library was built for ABI version 1, \
         whose tensors have at most {MAX_RANK_V1}; rebuild it against this kplace.h"
    )]
    Desc {
        /// `input` or `output`.
        side: &'static str,
        /// Its position on that side.
        index: usize,
        /// Its dimensions.
        rank: u32,
    },
    /// More tensors a side than a version 1 launch takes.
    #[error("a version 1 kernel takes at most {MAX_PORTS} tensors a side")]
    Ports,
    /// A launch's tensor with more dimensions than version 1 has.
    #[error("a tensor of {0} dimensions, past version 1's {MAX_RANK_V1}")]
    Tensor(u32),
}

/// A version 1 kernel's descriptors for `create`.
pub(super) struct Descs {
    inputs: Vec<TensorDescV1>,
    outputs: Vec<TensorDescV1>,
}

impl Descs {
    /// The descriptors in version 1's layout, or why one does not fit it.
    pub(super) fn of(inputs: &[TensorDesc], outputs: &[TensorDesc]) -> Result<Descs, V1Misfit> {
        let side = |descs: &[TensorDesc], side: &'static str| {
            descs
                .iter()
                .enumerate()
                .map(|(index, d)| {
                    d.to_v1().ok_or(V1Misfit::Desc {
                        side,
                        index,
                        rank: d.rank,
                    })
                })
                .collect::<Result<Vec<TensorDescV1>, V1Misfit>>()
        };
        Ok(Descs {
            inputs: side(inputs, "input")?,
            outputs: side(outputs, "output")?,
        })
    }

    /// The arrays, as `kplace_kernel_config` carries them (the library reads them as version
    /// 1's); valid while `self` lives.
    pub(super) fn pointers(&self) -> (*const TensorDesc, *const TensorDesc) {
        (
            self.inputs.as_ptr().cast::<TensorDesc>(),
            self.outputs.as_ptr().cast::<TensorDesc>(),
        )
    }
}

/// The most tensors a side a version 1 kernel's launch is given.
const MAX_PORTS: usize = 16;

/// A version 1 tensor slot not yet filled.
const EMPTY: TensorV1 = TensorV1 {
    desc: TensorDescV1 {
        dtype: Dtype(0),
        memory: MemorySpace::HOST,
        rank: 0,
        reserved: 0,
        shape: [0; MAX_RANK_V1],
        bytes: 0,
    },
    data: std::ptr::null_mut(),
};

/// A version 1 kernel's tensors for one launch, on the caller's stack.
pub(super) struct Tensors {
    inputs: [TensorV1; MAX_PORTS],
    outputs: [TensorV1; MAX_PORTS],
}

impl Tensors {
    /// Nothing filled yet.
    pub(super) const EMPTY: Tensors = Tensors {
        inputs: [EMPTY; MAX_PORTS],
        outputs: [EMPTY; MAX_PORTS],
    };

    /// Copies `inputs` and `outputs` in version 1's layout and points `args` at the copies,
    /// valid while `self` lives; or says why they do not fit it.
    pub(super) fn fill(
        &mut self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        args: &mut LaunchArgs,
    ) -> Result<(), V1Misfit> {
        for (side, to, arg) in [
            (inputs, &mut self.inputs, &mut args.inputs),
            (outputs, &mut self.outputs, &mut args.outputs),
        ] {
            if side.len() > MAX_PORTS {
                return Err(V1Misfit::Ports);
            }
            for (t, v) in side.iter().zip(to.iter_mut()) {
                *v = t.to_v1().ok_or(V1Misfit::Tensor(t.desc.rank))?;
            }
            *arg = to.as_ptr().cast::<Tensor>();
        }
        Ok(())
    }
}
