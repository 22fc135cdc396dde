//! Loading kernel libraries: the C test library loads and runs; every malformed library is
//! refused with a message naming its file.

use kplace::abi::{DeviceKind, Dtype, MemorySpace, Tensor, TensorDesc, Tile};
use kplace::plugin::{CreateConfig, KernelLibrary, PluginError};
use kplace_testkit::build_c_library;

fn desc(dtype: Dtype, shape: &[u64]) -> TensorDesc {
    let mut s = [0u64; kplace::abi::MAX_RANK];
    s[..shape.len()].copy_from_slice(shape);
    TensorDesc {
        dtype,
        memory: MemorySpace::HOST,
        rank: shape.len() as u32,
        reserved: 0,
        shape: s,
        bytes: dtype.bytes_for(shape).unwrap(),
    }
}

#[test]
fn a_c_library_loads_and_its_kernel_runs() {
    let path = build_c_library("test_kernels.c", "test_kernels", &[]);
    let lib = KernelLibrary::load(&path).unwrap();
    assert_eq!(lib.name(), "test-kernels");
    let names: Vec<(&str, DeviceKind)> = lib
        .kernels()
        .iter()
        .map(|k| (k.name.as_str(), k.device))
        .collect();
    assert_eq!(
        names,
        [
            ("test.magnitude2", DeviceKind::CPU),
            ("test.column_sum", DeviceKind::CPU),
            ("test.magnitude2", DeviceKind::CUDA),
            ("test.column_sum", DeviceKind::CUDA),
            ("test.weigh", DeviceKind::CPU),
            ("test.weigh", DeviceKind::CUDA),
            ("test.leaky", DeviceKind::CPU),
            ("test.leaky_reset", DeviceKind::CPU),
            ("test.leaky", DeviceKind::CUDA),
            ("test.leaky_reset", DeviceKind::CUDA),
        ],
        "one kernel name may be offered once per device kind"
    );
    let stateful: Vec<bool> = lib.kernels().iter().map(|k| k.is_stateful()).collect();
    assert_eq!(
        stateful,
        [
            false, false, false, false, false, false, true, true, true, true
        ]
    );
    let cuda = lib.find("test.magnitude2", DeviceKind::CUDA).unwrap();
    assert_eq!(
        cuda.info().memory,
        kplace::abi::MemorySpace::DEVICE,
        "device kinds are distinct"
    );

    let kernel = lib.find("test.magnitude2", DeviceKind::CPU).unwrap();
    let (rows, cols) = (4u64, 3u64);
    let inputs = [desc(Dtype::CI16, &[rows, cols])];
    let outputs = [desc(Dtype::F32, &[rows, cols])];
    let params = [("scale".to_string(), "0.5".to_string())];
    let state = kernel
        .create(&CreateConfig {
            params: &params,
            inputs: &inputs,
            outputs: &outputs,
            split: Some((0, 2)),
            device_ordinal: 0,
        })
        .unwrap();
    assert_eq!(state.workspace_bytes(), 0);

    let mut iq: Vec<i16> = (0..(rows * cols * 2) as i16).map(|v| v - 7).collect();
    let mut out = vec![f32::NAN; (rows * cols) as usize];
    let tin = [Tensor {
        desc: inputs[0],
        data: iq.as_mut_ptr().cast(),
    }];
    let tout = [Tensor {
        desc: outputs[0],
        data: out.as_mut_ptr().cast(),
    }];
    // Only the second tile: rows 2 and 3.
    // SAFETY: the tensors describe live buffers of their descriptors' sizes.
    unsafe {
        state.launch(
            &tin,
            &tout,
            (std::ptr::null_mut(), 0),
            std::ptr::null_mut(),
            Tile { begin: 2, count: 2 },
        )
    }
    .unwrap();
    for (k, v) in out.iter().enumerate() {
        if k < 6 {
            assert!(v.is_nan(), "a tile writes only its rows");
        } else {
            let (i, q) = (f32::from(iq[2 * k]), f32::from(iq[2 * k + 1]));
            assert_eq!(*v, 0.5 * (i * i + q * q));
        }
    }

    // A launch error comes back with the kernel's text.
    // SAFETY: as above.
    let err = unsafe {
        state.launch(
            &tin,
            &tout,
            (std::ptr::null_mut(), 0),
            std::ptr::null_mut(),
            Tile { begin: 3, count: 2 },
        )
    }
    .unwrap_err();
    assert_eq!(err.message, "tile out of range");
    assert!(err.to_string().contains("test.magnitude2"), "{err}");
}

#[test]
fn create_errors_carry_the_kernels_text() {
    let path = build_c_library("test_kernels.c", "test_kernels", &[]);
    let lib = KernelLibrary::load(&path).unwrap();
    let kernel = lib.find("test.magnitude2", DeviceKind::CPU).unwrap();
    let inputs = [desc(Dtype::CI16, &[2, 2])];
    let outputs = [desc(Dtype::F32, &[2, 2])];
    let params = [("scael".to_string(), "2".to_string())];
    let err = kernel
        .create(&CreateConfig {
            params: &params,
            inputs: &inputs,
            outputs: &outputs,
            split: None,
            device_ordinal: 0,
        })
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("unknown parameter scael") && text.contains("test.magnitude2"),
        "{text}"
    );
    let wrong = [desc(Dtype::CF32, &[2, 2])];
    let err = kernel
        .create(&CreateConfig {
            params: &[],
            inputs: &wrong,
            outputs: &outputs,
            split: None,
            device_ordinal: 0,
        })
        .unwrap_err();
    assert!(err.to_string().contains("input 0 must be ci16"), "{err}");
}

#[test]
fn a_missing_library_file_is_named() {
    let err = KernelLibrary::load(std::path::Path::new("/nonexistent/libnothing.so")).unwrap_err();
    assert!(matches!(err, PluginError::Missing { .. }));
    assert!(
        err.to_string().contains("/nonexistent/libnothing.so"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_a_shared_library_is_refused() {
    let (_dir, path) = kplace_testkit::write_temp("libfake.so", "not an ELF file");
    let err = KernelLibrary::load(&path).unwrap_err();
    assert!(matches!(err, PluginError::Load { .. }), "{err:?}");
    assert!(err.to_string().contains("libfake.so"), "{err}");
}

#[test]
fn a_library_built_for_another_abi_version_is_refused() {
    for (version, name) in [(3, "wrong_abi"), (0, "abi_zero")] {
        let define = format!("TEST_ABI_VERSION={version}");
        let path = build_c_library("test_kernels.c", name, &[&define]);
        let err = KernelLibrary::load(&path).unwrap_err();
        assert!(
            matches!(err, PluginError::AbiVersion { found, .. } if found == version),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("lib{name}.so"))
                && text.contains(&format!("version {version}"))
                && text.contains("versions 1 to 2"),
            "{text}"
        );
    }
}

/// A library built against version 1 of the ABI, whose table entries are shorter, still
/// loads: every kernel is found, stateless, and runs.
#[test]
fn a_version_1_library_loads_and_runs() {
    let path = build_c_library("test_kernels.c", "abi_one", &["TEST_ABI_VERSION=1"]);
    let lib = KernelLibrary::load(&path).unwrap();
    let names: Vec<(&str, DeviceKind, bool)> = lib
        .kernels()
        .iter()
        .map(|k| (k.name.as_str(), k.device, k.is_stateful()))
        .collect();
    assert_eq!(
        names,
        [
            ("test.magnitude2", DeviceKind::CPU, false),
            ("test.column_sum", DeviceKind::CPU, false),
            ("test.magnitude2", DeviceKind::CUDA, false),
            ("test.column_sum", DeviceKind::CUDA, false),
        ]
    );
    let kernel = lib.find("test.column_sum", DeviceKind::CPU).unwrap();
    let inputs = [desc(Dtype::F32, &[2, 3])];
    let outputs = [desc(Dtype::F32, &[3])];
    let state = kernel
        .create(&CreateConfig {
            params: &[],
            inputs: &inputs,
            outputs: &outputs,
            split: None,
            device_ordinal: 0,
        })
        .unwrap();
    assert_eq!(state.carry_bytes(), 0);
    let mut input = [1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0];
    let mut output = [0.0f32; 3];
    let tensor = |desc: TensorDesc, data: *mut f32| Tensor {
        desc,
        data: data.cast(),
    };
    // SAFETY: the buffers match their descriptors and outlive the call.
    unsafe {
        state.launch(
            &[tensor(inputs[0], input.as_mut_ptr())],
            &[tensor(outputs[0], output.as_mut_ptr())],
            (std::ptr::null_mut(), 0),
            std::ptr::null_mut(),
            Tile { begin: 0, count: 2 },
        )
    }
    .unwrap();
    assert_eq!(output, [11.0, 22.0, 33.0]);
    // Version 1 carries at most 4 dimensions: a deeper tensor is refused before create.
    let deep = [desc(Dtype::F32, &[1, 1, 1, 2, 3])];
    let e = kernel
        .create(&CreateConfig {
            params: &[],
            inputs: &deep,
            outputs: &outputs,
            split: None,
            device_ordinal: 0,
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("input 0 has 5 dimensions") && e.contains("ABI version 1"),
        "{e}"
    );
}

#[test]
fn a_library_without_the_entry_symbol_is_refused() {
    let path = build_c_library("test_kernels.c", "no_entry", &["TEST_NO_ENTRY"]);
    let err = KernelLibrary::load(&path).unwrap_err();
    assert!(matches!(err, PluginError::NoEntry { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("libno_entry.so") && text.contains("kplace_library_entry"),
        "{text}"
    );
}

#[test]
fn a_kernel_with_unknown_flags_or_a_stateful_kernel_without_its_carry_is_refused() {
    for (define, name, phrase) in [
        (
            "UNKNOWN_FLAGS",
            "unknown_flags",
            "kernel other.kernel has flags 0x10, which this kplace does not know",
        ),
        (
            "STATEFUL_NO_CARRY",
            "no_carry",
            "kernel other.kernel is stateful but has no carry_bytes function",
        ),
    ] {
        let path = build_c_library("duplicate.c", name, &[define]);
        let err = KernelLibrary::load(&path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("lib{name}.so")) && text.contains(phrase),
            "{text}"
        );
    }
}

#[test]
fn a_table_naming_a_kernel_twice_is_refused() {
    let path = build_c_library("duplicate.c", "duplicate", &[]);
    let err = KernelLibrary::load(&path).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("libduplicate.so") && text.contains("dup.kernel twice"),
        "{text}"
    );
}

#[test]
fn the_loaders_reason_is_in_the_message() {
    // Long enough to be read as an ELF header, which it is not.
    let (_dir, path) = kplace_testkit::write_temp("libgarbage.so", &"not an ELF file. ".repeat(8));
    let text = KernelLibrary::load(&path).unwrap_err().to_string();
    assert!(
        text.contains("libgarbage.so") && text.contains("invalid ELF header"),
        "the message should carry dlerror's reason: {text}"
    );
}

/// A FIFO named as a library would block dlopen until a writer came: it is refused first. The
/// load runs on a thread watched with a timeout, so a regression fails instead of hanging (the
/// FIFO is then opened for writing, which lets the blocked open return).
#[test]
fn a_fifo_is_refused_before_the_loader_opens_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("libfifo.so");
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo failed");
    let (tx, rx) = std::sync::mpsc::channel();
    let load_path = path.clone();
    std::thread::spawn(move || {
        let _ = tx.send(KernelLibrary::load(&load_path).map(|_| ()));
    });
    let result = match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(result) => result,
        Err(_) => {
            let _ = std::fs::OpenOptions::new().write(true).open(&path);
            panic!("loading a FIFO hung: it reached dlopen");
        }
    };
    let err = result.unwrap_err();
    assert!(matches!(err, PluginError::NotAFile { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("libfifo.so") && text.contains("not a regular file") && text.contains("FIFO"),
        "{text}"
    );
}

#[test]
fn a_directory_is_refused_as_not_a_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = KernelLibrary::load(dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            PluginError::NotAFile {
                kind: "a directory",
                ..
            }
        ),
        "{err:?}"
    );
}
