//! The exported C table, used as the runtime uses it: through `kplace_library_entry` and the
//! function pointers, with real `KernelConfig`, `LaunchArgs` and `Tensor` structs.

mod common;

use std::ffi::{CStr, c_char, c_void};

use common::*;
use kplace_abi::{
    ABI_VERSION, DeviceKind, Dtype, Kernel, LaunchArgs, Library, MemorySpace, Status, Tensor,
    TensorDesc, Tile,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn library() -> &'static Library {
    let table = kplace_cpu::kplace_library_entry();
    assert!(!table.is_null());
    // SAFETY: the entry returns a static table.
    unsafe { &*table }
}

fn kernels() -> &'static [Kernel] {
    let lib = library();
    // SAFETY: `n_kernels` entries, static.
    unsafe { std::slice::from_raw_parts(lib.kernels, lib.n_kernels as usize) }
}

fn kernel(name: &str) -> &'static Kernel {
    kernels()
        .iter()
        // SAFETY: names are static NUL-terminated strings.
        .find(|k| unsafe { CStr::from_ptr(k.name) }.to_str() == Ok(name))
        .unwrap_or_else(|| panic!("{name} is not in the table"))
}

#[test]
fn the_table_lists_the_four_radar_kernels_once() {
    let lib = library();
    assert_eq!(lib.abi_version, ABI_VERSION);
    assert_eq!(
        lib.abi_version, 2,
        "built against version 2, with no change to its source"
    );
    // SAFETY: a static NUL-terminated string.
    assert_eq!(unsafe { CStr::from_ptr(lib.name) }, c"kplace-cpu");
    // SAFETY: as above.
    let mut names: Vec<&str> = kernels()
        .iter()
        .map(|k| unsafe { CStr::from_ptr(k.name) }.to_str().expect("UTF-8"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "radar.cfar",
            "radar.cluster",
            "radar.doppler_fft",
            "radar.range_fft"
        ]
    );
    for k in kernels() {
        assert_eq!(k.device, DeviceKind::CPU);
        assert_eq!(k.memory, MemorySpace::HOST);
        assert_eq!((k.n_inputs, k.n_outputs), (1, 1));
        assert!(
            k.create.is_some()
                && k.workspace_bytes.is_some()
                && k.launch.is_some()
                && k.destroy.is_some()
        );
    }
}

/// Calls `create` through the table; returns the state or the status and message.
fn create(k: &Kernel, setup: &Setup) -> Result<*mut c_void, (Status, String)> {
    let mut state = std::ptr::null_mut();
    let mut error = [0 as c_char; 256];
    let create = k.create.expect("create");
    // SAFETY: a valid config, state slot and error buffer.
    let status = unsafe { create(setup.raw(), &mut state, error.as_mut_ptr(), error.len()) };
    if status == Status::OK {
        assert!(!state.is_null());
        Ok(state)
    } else {
        // SAFETY: the library NUL-terminates its error text.
        let message = unsafe { CStr::from_ptr(error.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Err((status, message))
    }
}

/// Calls `launch` through the table with one input and one output.
fn launch_c(
    k: &Kernel,
    state: *mut c_void,
    input: (TensorDesc, &Buf),
    output: (TensorDesc, &Buf),
    workspace: &Buf,
    workspace_bytes: u64,
) -> Result<(), (Status, String)> {
    let inputs = [Tensor {
        desc: input.0,
        data: input.1.ptr().cast(),
    }];
    let outputs = [Tensor {
        desc: output.0,
        data: output.1.ptr().cast(),
    }];
    let args = LaunchArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        n_inputs: 1,
        n_outputs: 1,
        workspace: workspace.ptr().cast(),
        workspace_bytes,
        stream: std::ptr::null_mut(),
        tile: Tile {
            begin: 0,
            count: input.0.shape[0],
        },
        ..Default::default()
    };
    let mut error = [0 as c_char; 256];
    let launch = k.launch.expect("launch");
    // SAFETY: a state from create, valid args and error buffer.
    let status = unsafe { launch(state, &args, error.as_mut_ptr(), error.len()) };
    if status == Status::OK {
        Ok(())
    } else {
        // SAFETY: the library NUL-terminates its error text.
        Err((
            status,
            unsafe { CStr::from_ptr(error.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
        ))
    }
}

#[test]
fn the_whole_chain_runs_through_the_c_table() {
    let (n, m) = (256u64, 32u64);
    let iq = desc(Dtype::CI16, &[m, n]);
    let cube = desc(Dtype::CF32, &[n, m]);
    let power = desc(Dtype::F32, &[n, m]);
    let list = desc(Dtype::RECORDS, &[512]);
    let clusters = desc(Dtype::RECORDS, &[64]);
    let (ns, ms) = (n.to_string(), m.to_string());
    let stages = [
        (
            "radar.range_fft",
            Setup::new(&[("planner", "estimate")], &[iq], &[cube]),
        ),
        (
            "radar.doppler_fft",
            Setup::new(&[("planner", "estimate")], &[cube], &[power]),
        ),
        ("radar.cfar", Setup::new(&[], &[power], &[list])),
        (
            "radar.cluster",
            Setup::new(
                &[("range_bins", &ns), ("doppler_bins", &ms)],
                &[list],
                &[clusters],
            ),
        ),
    ];

    // One tone on chirp-major samples (range bin 40, Doppler bin 5, amplitude 2000 counts)
    // over uniform noise of +-100 counts, which also keeps quantisation from making spurs.
    let mut samples = Buf::for_desc(&iq);
    let words = samples.slice_mut::<i16>();
    let mut rng = StdRng::seed_from_u64(3);
    for c in 0..m as usize {
        for s in 0..n as usize {
            let phase = 2.0
                * std::f64::consts::PI
                * (40.0 * s as f64 / n as f64 + 5.0 * c as f64 / m as f64);
            let (i, q) = (2000.0 * phase.cos(), 2000.0 * phase.sin());
            words[2 * (c * n as usize + s)] = (i + rng.random_range(-100.0..100.0)).round() as i16;
            words[2 * (c * n as usize + s) + 1] =
                (q + rng.random_range(-100.0..100.0)).round() as i16;
        }
    }
    let bufs = [&iq, &cube, &power, &list, &clusters].map(Buf::for_desc);
    let ports = [iq, cube, power, list, clusters];
    let buf = |i: usize| if i == 0 { &samples } else { &bufs[i] };
    for (i, (name, setup)) in stages.iter().enumerate() {
        let k = kernel(name);
        let state = create(k, setup).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        // SAFETY: a state from create.
        let bytes = unsafe { k.workspace_bytes.expect("workspace_bytes")(state) };
        let workspace = Buf::new(bytes as usize);
        launch_c(
            k,
            state,
            (ports[i], buf(i)),
            (ports[i + 1], buf(i + 1)),
            &workspace,
            bytes,
        )
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        if bytes > 0 {
            // Too small a workspace is refused, not overrun.
            let err = launch_c(
                k,
                state,
                (ports[i], buf(i)),
                (ports[i + 1], buf(i + 1)),
                &workspace,
                bytes - 1,
            )
            .expect_err("a short workspace must fail");
            assert_eq!(err.0, Status::INVALID_ARGUMENT, "{name}: {}", err.1);
            assert!(err.1.contains("workspace"), "{name}: {}", err.1);
        }
        // SAFETY: destroyed once.
        unsafe { k.destroy.expect("destroy")(state) };
    }
    let (header, found) = read_list(&bufs[4]);
    assert_eq!(header.overflow, 0);
    let cells: Vec<(u32, u32)> = found.iter().map(|d| (d.range_bin, d.doppler_bin)).collect();
    assert_eq!(cells, vec![(40, 5)]);
}

#[test]
fn errors_come_back_as_status_and_text() {
    let k = kernel("radar.cfar");
    let setup = Setup::new(
        &[("pfa", "1e-6"), ("scale", "3")],
        &[desc(Dtype::F32, &[64, 64])],
        &[desc(Dtype::RECORDS, &[8])],
    );
    let (status, message) = create(k, &setup).expect_err("both pfa and scale");
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(
        message.contains("pfa") && message.contains("scale"),
        "{message}"
    );

    // A tiny error buffer gets truncated, NUL-terminated text.
    let mut state = std::ptr::null_mut();
    let mut error = [0x7f as c_char; 8];
    // SAFETY: valid config, state slot and error buffer.
    let status = unsafe {
        k.create.expect("create")(setup.raw(), &mut state, error.as_mut_ptr(), error.len())
    };
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert_eq!(error[7], 0);

    // Null arguments and a null state are reported or ignored, never dereferenced.
    // SAFETY: the ABI allows null here; the shims check.
    unsafe {
        assert_eq!(
            k.create.expect("create")(std::ptr::null(), &mut state, error.as_mut_ptr(), 8),
            Status::INVALID_ARGUMENT
        );
        assert_eq!(
            k.workspace_bytes.expect("workspace_bytes")(std::ptr::null()),
            0
        );
        k.destroy.expect("destroy")(std::ptr::null_mut());
    }
}
