//! The library as the runtime sees it: its table, and create through the C ABI, which must
//! fail with a message (never a panic) when there is no GPU.

mod common;

use std::ffi::{CStr, c_char, c_void};

use common::device::*;
use common::*;
use kplace_abi::{ABI_VERSION, DeviceKind, Dtype, LaunchArgs, MemorySpace, Status};

fn table() -> &'static kplace_abi::Library {
    // SAFETY: the entry symbol returns a static table.
    unsafe { &*kplace_gpu::kplace_library_entry() }
}

#[test]
fn the_table_offers_the_three_gpu_kernels() {
    let library = table();
    assert_eq!(library.abi_version, ABI_VERSION);
    // SAFETY: static strings and arrays of the table.
    let name = unsafe { CStr::from_ptr(library.name) };
    assert_eq!(name, c"kplace-gpu");
    // SAFETY: the table's kernel array has n_kernels entries.
    let kernels =
        unsafe { std::slice::from_raw_parts(library.kernels, library.n_kernels as usize) };
    let names: Vec<&CStr> = kernels
        .iter()
        // SAFETY: every kernel's name is a static C string.
        .map(|k| unsafe { CStr::from_ptr(k.name) })
        .collect();
    assert_eq!(
        names,
        [c"radar.range_fft", c"radar.doppler_fft", c"radar.cfar"]
    );
    for k in kernels {
        assert_eq!(k.device, DeviceKind::CUDA);
        assert_eq!(k.memory, MemorySpace::DEVICE);
        assert_eq!((k.n_inputs, k.n_outputs), (1, 1));
        assert!(k.create.is_some() && k.launch.is_some());
        assert!(k.workspace_bytes.is_some() && k.destroy.is_some());
    }
}

/// Calls kernel `index`'s create through the table; returns the status and the message.
fn create_via_abi(index: usize, setup: &Setup) -> (Status, String, *mut std::ffi::c_void) {
    let library = table();
    // SAFETY: the table's arrays and function pointers are valid while the library is loaded.
    let kernel = unsafe { &*library.kernels.add(index) };
    let mut state = std::ptr::null_mut();
    let mut error = [0 as c_char; 512];
    let create = kernel.create.expect("create");
    // SAFETY: a valid config, state slot and error buffer.
    let status = unsafe { create(setup.raw(), &mut state, error.as_mut_ptr(), error.len()) };
    // SAFETY: the library NUL-terminates its message.
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    (status, message, state)
}

#[test]
fn invalid_parameters_are_refused_before_any_cuda_call() {
    let setup = Setup::new(
        &[("gaurd", "2")],
        &[desc(Dtype::F32, &[128, 64])],
        &[desc(Dtype::RECORDS, &[100])],
    );
    let (status, message, state) = create_via_abi(2, &setup);
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(message.contains("unknown parameter gaurd"), "{message}");
    assert!(state.is_null());
}

#[test]
fn without_a_gpu_create_fails_with_the_reason() {
    if kplace_gpu::probe().is_ok() {
        println!("skipped: a GPU is present (the GPU tests cover create)");
        return;
    }
    let setup = Setup::new(
        &[],
        &[desc(Dtype::F32, &[128, 64])],
        &[desc(Dtype::RECORDS, &[100])],
    );
    let (status, message, state) = create_via_abi(2, &setup);
    assert_eq!(status, Status::BACKEND, "{message}");
    assert!(
        message.contains("libcuda") || message.contains("device") || message.contains("cuInit"),
        "{message}"
    );
    assert!(state.is_null());
    println!("create without a GPU: {message}");
}

#[test]
fn a_kernel_through_the_c_abi_table() {
    let Some(gpu) = Gpu::open() else { return };
    // SAFETY: the entry symbol returns a static table; index 2 is radar.cfar.
    let kernel = unsafe { &(*kplace_gpu::kplace_library_entry()).kernels.add(2).read() };
    // SAFETY: a static string.
    assert_eq!(unsafe { CStr::from_ptr(kernel.name) }, c"radar.cfar");
    let (rows, cols) = (128u64, 64u64);
    let (i, o) = (desc(Dtype::F32, &[rows, cols]), desc(Dtype::RECORDS, &[64]));
    let setup = Setup::new(&[("scale", "2")], &[i], &[o]);
    let mut map = vec![10.0f32; (rows * cols) as usize];
    map[(70 * cols + 3) as usize] = 1e4;
    let (input, output) = (DevBuf::from_slice(&map), DevBuf::zeroed(o.bytes as usize));

    let mut state = std::ptr::null_mut();
    let mut error = [0 as c_char; 256];
    // SAFETY: valid config, state slot and error buffer; the context is current.
    let status = unsafe {
        (kernel.create.unwrap())(setup.raw(), &mut state, error.as_mut_ptr(), error.len())
    };
    assert_eq!(status, Status::OK);
    // SAFETY: a state from create.
    let ws = DevBuf::zeroed(unsafe { (kernel.workspace_bytes.unwrap())(state) } as usize);
    let (inputs, outputs) = ([tensor(i, &input)], [tensor(o, &output)]);
    let args = LaunchArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        n_inputs: 1,
        n_outputs: 1,
        workspace: ws.ptr as *mut c_void,
        workspace_bytes: ws.len as u64,
        stream: gpu.stream.cast(),
        tile: whole(rows),
        ..Default::default()
    };
    // SAFETY: as above; every pointer in `args` is valid.
    let status = unsafe { (kernel.launch.unwrap())(state, &args, error.as_mut_ptr(), error.len()) };
    assert_eq!(status, Status::OK);
    // A launch with too small a workspace is refused with a message, not a fault.
    let short = LaunchArgs {
        workspace_bytes: 64,
        ..args
    };
    // SAFETY: as above.
    let status =
        unsafe { (kernel.launch.unwrap())(state, &short, error.as_mut_ptr(), error.len()) };
    assert_eq!(status, Status::INVALID_ARGUMENT);
    gpu.sync();
    // SAFETY: a state from create, destroyed once after its work completed.
    unsafe { (kernel.destroy.unwrap())(state) };
    let (header, found) = read_list(&output.bytes());
    assert_eq!(
        (
            header.count,
            header.capacity,
            header.overflow,
            header.reserved
        ),
        (1, 64, 0, 0)
    );
    assert_eq!(
        (found[0].range_bin, found[0].doppler_bin, found[0].power),
        (70, 3, 1e4)
    );
}
