//! NVRTC: the CUDA C sources compiled at run time, for the device at hand.
//!
//! The library ships CUDA C, not binaries, so one build serves every GPU generation and needs
//! no CUDA toolkit where it is built. At the first `create` on a device the sources are
//! compiled for that device's compute capability with [`options`]; [`crate::program`] then
//! loads the result once per device and process.
//!
//! When this NVRTC knows the device's architecture the target is `sm_XY` and the module is
//! loaded from the CUBIN (native code: nothing left for the driver to compile). A device newer
//! than the NVRTC gets PTX for the newest architecture the NVRTC knows (`compute_XY`), which
//! the driver compiles forward.

use std::ffi::{CString, c_char, c_int};

use cudarc::nvrtc::result::{self, NvrtcError};
use cudarc::nvrtc::sys;
use kplace_abi::export::KernelError;

use crate::source::{Function, Source};

/// A compute capability, e.g. 9.0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl Arch {
    /// The capability as NVRTC numbers it: `10 * major + minor` (90 for 9.0).
    pub fn number(self) -> u32 {
        10 * self.major + self.minor
    }

    fn from_number(n: u32) -> Self {
        Self {
            major: n / 10,
            minor: n % 10,
        }
    }
}

/// What to compile for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// `--gpu-architecture=sm_XY`: native code (a CUBIN) plus PTX.
    Native(Arch),
    /// `--gpu-architecture=compute_XY`: PTX only, which the driver compiles for a newer device.
    Ptx(Arch),
}

impl Target {
    /// The `--gpu-architecture` option for this target.
    pub fn architecture_option(self) -> String {
        match self {
            Target::Native(arch) => format!("--gpu-architecture=sm_{}", arch.number()),
            Target::Ptx(arch) => format!("--gpu-architecture=compute_{}", arch.number()),
        }
    }
}

/// Every option the sources are compiled with, for `target`.
///
/// `--fmad=false` keeps every product and sum separately rounded, as on the CPU (the kernels
/// also use explicitly rounded intrinsics, so this is a second line of defence); the other
/// three restate NVRTC's defaults, so that no change of defaults can flush subnormal powers
/// or approximate a division.
pub fn options(target: Target) -> Vec<String> {
    vec![
        target.architecture_option(),
        "--fmad=false".to_string(),
        "--ftz=false".to_string(),
        "--prec-div=true".to_string(),
        "--prec-sqrt=true".to_string(),
    ]
}

/// The compiled form of one source.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The PTX, NUL-terminated (the form `cuModuleLoadData` reads).
    pub ptx: CString,
    /// Native code, for a [`Target::Native`] compilation.
    pub cubin: Option<Vec<u8>>,
}

fn nvrtc_error(call: &str, e: NvrtcError) -> KernelError {
    KernelError::backend(format!("NVRTC {call} failed: {:?}", e.0))
}

/// Fails with a clear error unless libnvrtc can be loaded (cudarc would panic on first use).
/// libnvrtc and its builtins are found where the machine keeps them (`kplace_cuda_libs`) and
/// loaded first, builtins before libnvrtc, so cudarc's dlopen by name and libnvrtc's own
/// dlopen of its builtins resolve to them.
pub fn probe() -> Result<(), KernelError> {
    let found = kplace_cuda_libs::find(kplace_cuda_libs::Library::Nvrtc);
    // SAFETY: only tries to load the library; runs no code from it.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(KernelError::backend(format!(
            "libnvrtc could not be loaded: the GPU kernels are compiled at run time by NVRTC \
             (libnvrtc.so.13 with libnvrtc-builtins.so.13.0 beside it): {}",
            found.not_found_message()
        )))
    }
}

/// The NVRTC version, `(major, minor)`.
pub fn version() -> Result<(i32, i32), KernelError> {
    probe()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| nvrtc_error("nvrtcVersion", e))?;
    Ok((major, minor))
}

/// The architectures this NVRTC can compile for, ascending.
pub fn supported_archs() -> Result<Vec<Arch>, KernelError> {
    probe()?;
    let mut count: c_int = 0;
    // SAFETY: a valid out-pointer.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| nvrtc_error("nvrtcGetNumSupportedArchs", e))?;
    let mut archs: Vec<c_int> = vec![0; usize::try_from(count).unwrap_or(0)];
    if !archs.is_empty() {
        // SAFETY: room for `count` values, as NVRTC reported.
        unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
            .result()
            .map_err(|e| nvrtc_error("nvrtcGetSupportedArchs", e))?;
    }
    let mut archs: Vec<Arch> = archs
        .into_iter()
        .filter_map(|a| u32::try_from(a).ok())
        .map(Arch::from_number)
        .collect();
    archs.sort();
    Ok(archs)
}

/// The target for a device of capability `device`: native code when this NVRTC knows the
/// architecture, otherwise PTX for the newest one it knows below it.
pub fn target_for(device: Arch) -> Result<Target, KernelError> {
    let archs = supported_archs()?;
    if archs.contains(&device) {
        return Ok(Target::Native(device));
    }
    match archs.iter().rev().find(|a| **a < device) {
        Some(&older) => Ok(Target::Ptx(older)),
        None => Err(KernelError::backend(format!(
            "this NVRTC cannot compile for compute capability {}.{} (it supports {})",
            device.major,
            device.minor,
            archs
                .iter()
                .map(|a| format!("{}.{}", a.major, a.minor))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Destroys an NVRTC program when dropped.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by create_program and destroyed only here. Nothing useful can be
        // done about a failure to free a program.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// Text of a `c_char` buffer up to its first NUL.
fn text_of(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` for `target` with [`options`]. A compilation error carries NVRTC's log.
pub fn compile(source: Source, target: Target) -> Result<Compiled, KernelError> {
    probe()?;
    let program = Program(
        result::create_program(source.text(), Some(source.file_name()))
            .map_err(|e| nvrtc_error("nvrtcCreateProgram", e))?,
    );
    let options = options(target);
    // SAFETY: a live program; the options contain no NUL bytes.
    if let Err(e) = unsafe { result::compile_program(program.0, &options) } {
        // SAFETY: a live program.
        let log = unsafe { result::get_program_log(program.0) }
            .map(|log| text_of(&log))
            .unwrap_or_else(|_| "(no log)".to_string());
        return Err(KernelError::backend(format!(
            "NVRTC could not compile {} with {}: {:?}\n{log}",
            source.file_name().to_string_lossy(),
            options.join(" "),
            e.0
        )));
    }
    // SAFETY: a live, compiled program.
    let ptx = unsafe { result::get_ptx(program.0) }.map_err(|e| nvrtc_error("nvrtcGetPTX", e))?;
    let ptx = CString::new(text_of(&ptx))
        .map_err(|_| KernelError::internal("NVRTC returned PTX with an interior NUL"))?;
    let cubin = match target {
        Target::Ptx(_) => None,
        // SAFETY: a live, compiled program.
        Target::Native(_) => Some(unsafe { get_cubin(program.0) }?),
    };
    Ok(Compiled { ptx, cubin })
}

/// The CUBIN of a compiled program.
///
/// # Safety
/// `program` must be live and compiled for a real architecture.
unsafe fn get_cubin(program: sys::nvrtcProgram) -> Result<Vec<u8>, KernelError> {
    let mut size = 0usize;
    // SAFETY: forwarded; a valid out-pointer.
    unsafe { sys::nvrtcGetCUBINSize(program, &mut size) }
        .result()
        .map_err(|e| nvrtc_error("nvrtcGetCUBINSize", e))?;
    let mut cubin = vec![0u8; size];
    if size > 0 {
        // SAFETY: room for `size` bytes, as NVRTC reported.
        unsafe { sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()) }
            .result()
            .map_err(|e| nvrtc_error("nvrtcGetCUBIN", e))?;
    }
    if cubin.is_empty() {
        return Err(KernelError::backend("NVRTC produced an empty CUBIN"));
    }
    Ok(cubin)
}

/// What is wrong with a library's compiled code, by source file: what [`check_program`] finds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// NVRTC did not compile the source.
    #[error("{file}: {message}")]
    Compile {
        /// The source's file name.
        file: String,
        /// NVRTC's message (its log included).
        message: String,
    },
    /// The PTX is for another architecture than the target's.
    #[error("{file}: the PTX is not for sm_{arch}")]
    Arch {
        /// The source's file name.
        file: String,
        /// The target's architecture number.
        arch: u32,
    },
    /// A function of the source has no entry in its PTX.
    #[error("{file}: {entry} missing from the PTX")]
    MissingEntry {
        /// The source's file name.
        file: String,
        /// The entry looked for (`.entry NAME(`).
        entry: String,
    },
    /// The PTX fuses a multiply and an add, which the CPU's code rounds apart.
    #[error("{file}: the PTX contains {instruction}")]
    Fused {
        /// The source's file name.
        file: String,
        /// The fused instruction found.
        instruction: &'static str,
    },
    /// A native target gave no ELF CUBIN.
    #[error("{file}: no ELF CUBIN")]
    NoCubin {
        /// The source's file name.
        file: String,
    },
    /// A PTX-only target gave a CUBIN.
    #[error("{file}: a CUBIN for PTX only")]
    CubinForPtx {
        /// The source's file name.
        file: String,
    },
}

/// Compiles every source of library `F` for `target` and checks what a library promises of
/// its compiled code: every function an entry of its source's PTX, no fused multiply-add
/// (each product and sum rounded on its own, as on the CPU; integer `mad.lo` is exact and
/// allowed), and for a native target a CUBIN (an ELF image). What each library's NVRTC test
/// asserts; the error names the source and what is wrong.
pub fn check_program<F: Function>(target: Target) -> Result<(), ProgramError> {
    for (s, &source) in F::SOURCES.iter().enumerate() {
        let name = source.file_name().to_string_lossy();
        let file = || name.clone().into_owned();
        let compiled = compile(source, target).map_err(|e| ProgramError::Compile {
            file: file(),
            message: e.message,
        })?;
        let ptx = compiled.ptx.to_string_lossy();
        let arch = match target {
            Target::Native(arch) | Target::Ptx(arch) => arch.number(),
        };
        if !ptx.contains(&format!(".target sm_{arch}")) {
            return Err(ProgramError::Arch { file: file(), arch });
        }
        for function in F::ALL.iter().filter(|f| f.source() == s) {
            let entry = format!(".entry {}(", function.name().to_string_lossy());
            if !ptx.contains(&entry) {
                return Err(ProgramError::MissingEntry {
                    file: file(),
                    entry,
                });
            }
        }
        if let Some(fused) = ["fma.rn.f32", "fma.rn.f64", "fma.rn.ftz"]
            .into_iter()
            .find(|fused| ptx.contains(fused))
        {
            return Err(ProgramError::Fused {
                file: file(),
                instruction: fused,
            });
        }
        match (target, compiled.cubin) {
            (Target::Native(_), Some(cubin)) if cubin.starts_with(b"\x7fELF") => {}
            (Target::Native(_), _) => return Err(ProgramError::NoCubin { file: file() }),
            (Target::Ptx(_), None) => {}
            (Target::Ptx(_), Some(_)) => return Err(ProgramError::CubinForPtx { file: file() }),
        }
    }
    Ok(())
}
