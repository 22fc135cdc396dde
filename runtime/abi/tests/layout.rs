//! The Rust mirror must have the layout of kplace.h as the system C compiler sees it.

use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use kplace_abi::*;

/// Compiles and runs a C program that prints `name value` lines for the header's layout.
fn c_layout() -> Option<Vec<(String, u64)>> {
    let header_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi-layout");
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    let mut program = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"kplace.h\"\nint main(void) {\n",
    );
    for (ty, fields) in FIELDS {
        program += &format!("printf(\"sizeof {ty} %zu\\n\", sizeof({ty}));\n");
        for f in *fields {
            program += &format!("printf(\"{ty}.{f} %zu\\n\", offsetof({ty}, {f}));\n");
        }
    }
    for (_, name) in Dtype::ALL {
        let constant = format!("KPLACE_DTYPE_{}", name.to_uppercase());
        program += &format!("printf(\"{constant} %u\\n\", (unsigned){constant});\n");
    }
    program += "printf(\"KPLACE_DTYPE_DETECTIONS %u\\n\", (unsigned)KPLACE_DTYPE_DETECTIONS);\n";
    program += "printf(\"KPLACE_RECORD_BYTES %u\\n\", KPLACE_RECORD_BYTES);\n";
    program += "printf(\"KPLACE_ABI_VERSION %u\\n\", KPLACE_ABI_VERSION);\n";
    program += "printf(\"KPLACE_ABI_MIN_VERSION %u\\n\", KPLACE_ABI_MIN_VERSION);\n";
    program += "printf(\"KPLACE_MAX_RANK %u\\n\", KPLACE_MAX_RANK);\n";
    program += "printf(\"KPLACE_MAX_RANK_V1 %u\\n\", KPLACE_MAX_RANK_V1);\n";
    for flag in [
        "KPLACE_KERNEL_STATEFUL",
        "KPLACE_KERNEL_RESET_ON_GAP",
        "KPLACE_CARRY_FRESH",
    ] {
        program += &format!("printf(\"{flag} %u\\n\", (unsigned){flag});\n");
    }
    program += "return 0; }\n";
    std::fs::write(&src, program).expect("write layout.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(&header_dir)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("kplace.h failed to compile as C11 ({s})"),
        Err(e) => {
            eprintln!("skipping: no C compiler ({cc}): {e}");
            return None;
        }
    }
    let out = Command::new(&exe).output().expect("run layout program");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    Some(
        text.lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').expect("name value");
                (k.to_string(), v.parse().expect("number"))
            })
            .collect(),
    )
}

const FIELDS: &[(&str, &[&str])] = &[
    ("kplace_record", &["words"]),
    (
        "kplace_record_list",
        &["count", "capacity", "overflow", "reserved", "records"],
    ),
    // The deprecated names: the same layout.
    ("kplace_detection", &["range_bin", "doppler_bin", "power"]),
    (
        "kplace_detection_list",
        &["count", "capacity", "overflow", "reserved", "records"],
    ),
    (
        "kplace_tensor_desc",
        &["dtype", "memory", "rank", "shape", "bytes"],
    ),
    ("kplace_tensor", &["desc", "data"]),
    (
        "kplace_tensor_desc_v1",
        &["dtype", "memory", "rank", "shape", "bytes"],
    ),
    ("kplace_tensor_v1", &["desc", "data"]),
    ("kplace_param", &["name", "value"]),
    (
        "kplace_kernel_config",
        &[
            "params",
            "inputs",
            "outputs",
            "n_params",
            "n_inputs",
            "n_outputs",
            "split_axis",
            "tile",
            "device_ordinal",
        ],
    ),
    ("kplace_tile", &["begin", "count"]),
    (
        "kplace_launch_args",
        &[
            "inputs",
            "outputs",
            "n_inputs",
            "n_outputs",
            "workspace",
            "workspace_bytes",
            "stream",
            "tile",
            "carry",
            "carry_bytes",
            "frame",
            "frames_missing",
            "carry_flags",
            "reserved2",
        ],
    ),
    (
        "kplace_kernel",
        &[
            "name",
            "device",
            "memory",
            "n_inputs",
            "n_outputs",
            "create",
            "workspace_bytes",
            "launch",
            "destroy",
            "flags",
            "reserved",
            "carry_bytes",
        ],
    ),
    (
        "kplace_kernel_v1",
        &[
            "name",
            "device",
            "memory",
            "n_inputs",
            "n_outputs",
            "create",
            "workspace_bytes",
            "launch",
            "destroy",
        ],
    ),
    (
        "kplace_library",
        &["abi_version", "n_kernels", "name", "kernels"],
    ),
];

fn rust_layout() -> Vec<(String, u64)> {
    macro_rules! layout {
        ($out:ident, $c:literal, $t:ty, [$($f:ident),*]) => {
            $out.push((concat!("sizeof ", $c).to_string(), size_of::<$t>() as u64));
            $( $out.push((concat!($c, ".", stringify!($f)).to_string(), offset_of!($t, $f) as u64)); )*
        };
    }
    let mut v = Vec::new();
    layout!(v, "kplace_record", Record, [words]);
    let list = |v: &mut Vec<(String, u64)>, name: &str| {
        v.push((
            format!("sizeof {name}"),
            size_of::<RecordListHeader>() as u64,
        ));
        for (f, o) in [
            ("count", offset_of!(RecordListHeader, count)),
            ("capacity", offset_of!(RecordListHeader, capacity)),
            ("overflow", offset_of!(RecordListHeader, overflow)),
            ("reserved", offset_of!(RecordListHeader, reserved)),
            ("records", size_of::<RecordListHeader>()),
        ] {
            v.push((format!("{name}.{f}"), o as u64));
        }
    };
    list(&mut v, "kplace_record_list");
    // The deprecated detection is a record of three words: bins, then the power.
    v.push(("sizeof kplace_detection".into(), RECORD_BYTES as u64));
    for (f, o) in [("range_bin", 0), ("doppler_bin", 4), ("power", 8)] {
        v.push((format!("kplace_detection.{f}"), o));
    }
    list(&mut v, "kplace_detection_list");
    layout!(
        v,
        "kplace_tensor_desc",
        TensorDesc,
        [dtype, memory, rank, shape, bytes]
    );
    layout!(v, "kplace_tensor", Tensor, [desc, data]);
    layout!(
        v,
        "kplace_tensor_desc_v1",
        TensorDescV1,
        [dtype, memory, rank, shape, bytes]
    );
    layout!(v, "kplace_tensor_v1", TensorV1, [desc, data]);
    layout!(v, "kplace_param", Param, [name, value]);
    layout!(
        v,
        "kplace_kernel_config",
        KernelConfig,
        [
            params,
            inputs,
            outputs,
            n_params,
            n_inputs,
            n_outputs,
            split_axis,
            tile,
            device_ordinal
        ]
    );
    layout!(v, "kplace_tile", Tile, [begin, count]);
    layout!(
        v,
        "kplace_launch_args",
        LaunchArgs,
        [
            inputs,
            outputs,
            n_inputs,
            n_outputs,
            workspace,
            workspace_bytes,
            stream,
            tile,
            carry,
            carry_bytes,
            frame,
            frames_missing,
            carry_flags,
            reserved2
        ]
    );
    layout!(
        v,
        "kplace_kernel",
        Kernel,
        [
            name,
            device,
            memory,
            n_inputs,
            n_outputs,
            create,
            workspace_bytes,
            launch,
            destroy,
            flags,
            reserved,
            carry_bytes
        ]
    );
    layout!(
        v,
        "kplace_kernel_v1",
        KernelV1,
        [
            name,
            device,
            memory,
            n_inputs,
            n_outputs,
            create,
            workspace_bytes,
            launch,
            destroy
        ]
    );
    layout!(
        v,
        "kplace_library",
        Library,
        [abi_version, n_kernels, name, kernels]
    );
    for (dtype, name) in Dtype::ALL {
        v.push((
            format!("KPLACE_DTYPE_{}", name.to_uppercase()),
            u64::from(dtype.0),
        ));
    }
    // The deprecated name of the record list's dtype.
    v.push((
        "KPLACE_DTYPE_DETECTIONS".into(),
        u64::from(Dtype::RECORDS.0),
    ));
    v.push(("KPLACE_RECORD_BYTES".into(), RECORD_BYTES as u64));
    v.push(("KPLACE_ABI_VERSION".into(), ABI_VERSION as u64));
    v.push(("KPLACE_ABI_MIN_VERSION".into(), ABI_MIN_VERSION as u64));
    v.push(("KPLACE_MAX_RANK".into(), MAX_RANK as u64));
    v.push(("KPLACE_MAX_RANK_V1".into(), MAX_RANK_V1 as u64));
    v.push((
        "KPLACE_KERNEL_STATEFUL".into(),
        u64::from(KernelFlags::STATEFUL.0),
    ));
    v.push((
        "KPLACE_KERNEL_RESET_ON_GAP".into(),
        u64::from(KernelFlags::RESET_ON_GAP.0),
    ));
    v.push(("KPLACE_CARRY_FRESH".into(), u64::from(CarryFlags::FRESH.0)));
    v
}

#[test]
fn rust_mirror_matches_the_c_header() {
    let Some(c) = c_layout() else { return };
    let rust = rust_layout();
    assert_eq!(c.len(), rust.len(), "both sides describe the same items");
    for (c_item, r_item) in c.iter().zip(&rust) {
        assert_eq!(
            c_item, r_item,
            "layout differs between kplace.h and kplace-abi"
        );
    }
}

#[test]
fn record_list_sizes_follow_the_header() {
    assert_eq!(Dtype::RECORDS.bytes_for(&[10]), Some(16 + 10 * 12));
    // The record list's former graph name still names it.
    assert_eq!(Dtype::from_name("detections"), Some(Dtype::RECORDS));
    assert_eq!(Dtype::RECORDS.name(), Some("records"));
    assert_eq!(Dtype::CI16.bytes_for(&[128, 1024]), Some(128 * 1024 * 4));
    assert_eq!(Dtype::CF32.bytes_for(&[1024, 128]), Some(1024 * 128 * 8));
    assert_eq!(Dtype(99).bytes_for(&[1]), None);
    for (dtype, bytes) in [
        (Dtype::I8, 1),
        (Dtype::I16, 2),
        (Dtype::I32, 4),
        (Dtype::F16, 2),
        (Dtype::F64, 8),
        (Dtype::CI8, 2),
        (Dtype::CF16, 4),
        (Dtype::CF64, 16),
    ] {
        assert_eq!(dtype.bytes_for(&[3, 5]), Some(15 * bytes), "{dtype:?}");
    }
    assert_eq!(Dtype::F32.bytes_for(&[u64::MAX, 2]), None);
}

#[test]
fn error_text_is_truncated_on_a_char_boundary_and_terminated() {
    let mut buf = [1 as std::ffi::c_char; 6];
    // SAFETY: `buf` is writable for its length.
    unsafe { export::write_error(buf.as_mut_ptr(), buf.len(), "héllo world") };
    // SAFETY: write_error terminated the text inside `buf`.
    let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap();
    assert_eq!(text, "héll");
    // SAFETY: a null buffer is allowed: nothing is written.
    unsafe { export::write_error(std::ptr::null_mut(), 10, "ignored") };
}

#[test]
fn record_list_view_reads_and_checks() {
    let mut bytes = vec![0u8; 16 + 3 * 12];
    bytes[0..4].copy_from_slice(&2u32.to_ne_bytes());
    bytes[4..8].copy_from_slice(&3u32.to_ne_bytes());
    bytes[8..12].copy_from_slice(&5u32.to_ne_bytes());
    for (i, (r, d, p)) in [(7u32, 9u32, 1.5f32), (8, 0, 2.5)].into_iter().enumerate() {
        let o = 16 + i * 12;
        bytes[o..o + 4].copy_from_slice(&r.to_ne_bytes());
        bytes[o + 4..o + 8].copy_from_slice(&d.to_ne_bytes());
        bytes[o + 8..o + 12].copy_from_slice(&p.to_ne_bytes());
    }
    let list = RecordList::parse(&bytes).unwrap();
    assert_eq!(list.header().overflow, 5);
    assert_eq!(list.records().len(), 2);
    let records: Vec<&[u8; RECORD_BYTES]> = list.records().collect();
    assert_eq!(records, [&bytes[16..28], &bytes[28..40]]);
    assert_eq!(records[1][..4], 8u32.to_ne_bytes());
    assert_eq!(
        RecordList::parse(&bytes[..10]).unwrap_err(),
        RecordListError::Truncated
    );
    assert_eq!(
        RecordList::parse(&bytes[..40]).unwrap_err(),
        RecordListError::ShorterThanCapacity
    );
    bytes[0..4].copy_from_slice(&4u32.to_ne_bytes());
    assert_eq!(
        RecordList::parse(&bytes).unwrap_err(),
        RecordListError::CountExceedsCapacity
    );
}

#[test]
fn a_described_tensor_has_its_dimensions_and_exactly_its_bytes() {
    use kplace_abi::{Dtype, MemorySpace, TensorDesc};
    let d = TensorDesc::new(Dtype::CF32, MemorySpace::DEVICE, &[128, 1024]).unwrap();
    assert_eq!(
        (d.dims(), d.rank, d.bytes),
        (&[128, 1024][..], 2, 128 * 1024 * 8)
    );
    assert_eq!(d.shape, [128, 1024, 0, 0, 0, 0, 0, 0]);
    let v1 = d.to_v1().unwrap();
    assert_eq!(
        (v1.shape, v1.rank, v1.bytes),
        ([128, 1024, 0, 0], 2, d.bytes)
    );
    let deep = TensorDesc::new(Dtype::F32, MemorySpace::HOST, &[2; 8]).unwrap();
    assert_eq!((deep.dims(), deep.bytes), (&[2u64; 8][..], 4 * 256));
    assert_eq!(deep.to_v1(), None, "version 1 carries at most 4 dimensions");
    let list = TensorDesc::new(Dtype::RECORDS, MemorySpace::HOST, &[4]).unwrap();
    assert_eq!(list.bytes, Dtype::RECORDS.bytes_for(&[4]).unwrap());
    // More dimensions than the ABI carries, or a size past u64, describe nothing.
    assert_eq!(
        TensorDesc::new(Dtype::F32, MemorySpace::HOST, &[1; 9]),
        None
    );
    assert_eq!(
        TensorDesc::new(Dtype::F32, MemorySpace::HOST, &[u64::MAX, 2]),
        None
    );
}
