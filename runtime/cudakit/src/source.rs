//! A library's CUDA C: its source files and the functions they define.

use std::ffi::CStr;

/// One CUDA C source file, embedded in the library.
///
/// The text is plain CUDA C that NVRTC compiles on its own: no includes. Sources a library
/// also tests on the host simulator (`kplace-cuda-hostsim`) use, of CUDA's extensions, only
/// what its shim provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    file_name: &'static CStr,
    text: &'static CStr,
}

impl Source {
    /// A source named `file_name` (for NVRTC's diagnostics) with `text`, which must end in
    /// its one NUL byte: `Source::new(c"fft.cu", concat!(include_str!("../kernels/fft.cu"),
    /// "\0"))`. Evaluated in a `const`, a text with no or another NUL fails the build.
    pub const fn new(file_name: &'static CStr, text: &'static str) -> Self {
        match CStr::from_bytes_with_nul(text.as_bytes()) {
            Ok(text) => Self { file_name, text },
            Err(_) => panic!("a CUDA source must end in its only NUL byte"),
        }
    }

    /// The file's name, as NVRTC reports it in diagnostics.
    pub fn file_name(self) -> &'static CStr {
        self.file_name
    }

    /// The file's text, NUL-terminated for NVRTC.
    pub fn text(self) -> &'static CStr {
        self.text
    }
}

/// A library's `extern "C" __global__` functions, in handle order.
pub trait Function: Copy + Send + Sync + 'static {
    /// Every source of the library, in module order.
    const SOURCES: &'static [Source];
    /// Every function, in handle order: `ALL[f.index()] == f`.
    const ALL: &'static [Self];

    /// The symbol's name in its source.
    fn name(self) -> &'static CStr;
    /// The position in [`Function::SOURCES`] of the source that defines it.
    fn source(self) -> usize;
    /// The position in [`Function::ALL`].
    fn index(self) -> usize;
}

/// How a library's [`Function`] listing differs from what its sources define.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// A function's [`Function::index`] is not its place in [`Function::ALL`].
    #[error("{function} has index {index} but is ALL[{position}]")]
    Index {
        /// The function's name.
        function: String,
        /// The index it gives.
        index: usize,
        /// Its place in `ALL`.
        position: usize,
    },
    /// A function names a source the library does not have.
    #[error("{function}: no source {module}")]
    NoSource {
        /// The function's name.
        function: String,
        /// The source it names, as a position in [`Function::SOURCES`].
        module: usize,
    },
    /// A function is not defined (`extern "C" __global__ void NAME(`) in the source it names.
    #[error("{function} is not defined in {file}")]
    NotDefined {
        /// The function's name.
        function: String,
        /// The source's file name.
        file: String,
    },
    /// A source defines more or fewer kernels than the listing names in it.
    #[error("{file} defines {defined} kernels, the listing names {listed}")]
    Count {
        /// The source's file name.
        file: String,
        /// Kernels it defines.
        defined: usize,
        /// Functions the listing places in it.
        listed: usize,
    },
}

/// Checks that `F` lists, in handle order, exactly the functions its sources define, each in
/// the source it names: what a library's unit test asserts of its [`Function`].
pub fn check_listing<F: Function>() -> Result<(), ListingError> {
    const DEFINITION: &str = "extern \"C\" __global__ void ";
    for (i, &f) in F::ALL.iter().enumerate() {
        let name = f.name().to_string_lossy();
        if f.index() != i {
            return Err(ListingError::Index {
                function: name.into_owned(),
                index: f.index(),
                position: i,
            });
        }
        let source = F::SOURCES
            .get(f.source())
            .ok_or_else(|| ListingError::NoSource {
                function: name.to_string(),
                module: f.source(),
            })?;
        let text = source.text().to_string_lossy();
        if !text.contains(&format!("{DEFINITION}{name}(")) {
            return Err(ListingError::NotDefined {
                function: name.into_owned(),
                file: source.file_name().to_string_lossy().into_owned(),
            });
        }
    }
    for (s, source) in F::SOURCES.iter().enumerate() {
        let defined = source.text().to_string_lossy().matches(DEFINITION).count();
        let listed = F::ALL.iter().filter(|f| f.source() == s).count();
        if defined != listed {
            return Err(ListingError::Count {
                file: source.file_name().to_string_lossy().into_owned(),
                defined,
                listed,
            });
        }
    }
    Ok(())
}
