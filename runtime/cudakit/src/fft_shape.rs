//! The shape of a batch of FFTs: which way, how many transforms of how many points, and where their
//! values lie (in place and contiguous, or out of place with strides). Plain data, shared by
//! the kernels' plans that describe their transforms, the cuFFT plans that run them on a GPU
//! ([`crate::cufft`]), and the queues that enqueue them ([`crate::queue`]). A shape says
//! nothing of CUDA; its `span` and `at` are the element indices cuFFT's advanced layout uses.

/// Where the values of a batch of one-dimensional transforms lie, in complex values from the
/// batch's base address: point `x` of transform `b` is element `b * dist + x * stride`
/// (cuFFT's advanced data layout for rank 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FftStrides {
    /// Elements between consecutive points of one transform.
    pub stride: usize,
    /// Elements between the first points of consecutive transforms.
    pub dist: usize,
}

impl FftStrides {
    /// Transforms of `len` points stored one after another (cuFFT's basic layout).
    pub fn contiguous(len: usize) -> Self {
        Self {
            stride: 1,
            dist: len,
        }
    }

    /// Elements from the first a batch of `batch` transforms of `len` points touches to one
    /// past the last (0 for an empty batch).
    pub fn span(self, len: usize, batch: usize) -> usize {
        if len == 0 || batch == 0 {
            0
        } else {
            (batch - 1) * self.dist + (len - 1) * self.stride + 1
        }
    }

    /// The element point `x` of transform `b` lies at.
    pub fn at(self, b: usize, x: usize) -> usize {
        b * self.dist + x * self.stride
    }
}

/// Whether a batch of FFTs overwrites its input or writes a separate buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftLayout {
    /// In place and contiguous: the transforms lie one after another, each overwritten by
    /// its result.
    InPlace,
    /// Out of place: read with `input`'s strides from one buffer, written with `output`'s to
    /// another that does not overlap it. Only the output elements the layout names are
    /// written.
    OutOfPlace {
        /// The input's layout.
        input: FftStrides,
        /// The output's layout.
        output: FftStrides,
    },
}

/// The sign of a transform's exponent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FftDirection {
    /// `X[k] = sum_n x[n] exp(-2 pi i k n / N)`.
    #[default]
    Forward,
    /// `exp(+2 pi i k n / N)`, unnormalised.
    Inverse,
}

/// A batch of unnormalised complex-to-complex FFTs: `batch` transforms of `len` points each,
/// laid out as `layout` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FftShape {
    /// Forward or inverse.
    pub direction: FftDirection,
    /// Points per transform.
    pub len: usize,
    /// Transforms per batch.
    pub batch: usize,
    /// In place, or out of place with strides.
    pub layout: FftLayout,
}

impl FftShape {
    /// The input's layout.
    pub fn input(&self) -> FftStrides {
        match self.layout {
            FftLayout::InPlace => FftStrides::contiguous(self.len),
            FftLayout::OutOfPlace { input, .. } => input,
        }
    }

    /// The output's layout (the input's, in place).
    pub fn output(&self) -> FftStrides {
        match self.layout {
            FftLayout::InPlace => FftStrides::contiguous(self.len),
            FftLayout::OutOfPlace { output, .. } => output,
        }
    }

    /// Whether the transforms overwrite their input.
    pub fn in_place(&self) -> bool {
        self.layout == FftLayout::InPlace
    }
}
