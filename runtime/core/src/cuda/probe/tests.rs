use super::*;

#[test]
fn cuda_versions_decode_like_the_driver_encodes_them() {
    assert_eq!(
        CudaVersion::from_driver(13000),
        Some(CudaVersion {
            major: 13,
            minor: 0
        })
    );
    assert_eq!(
        CudaVersion::from_driver(12080).map(|v| v.to_string()),
        Some("12.8".into())
    );
    assert_eq!(CudaVersion::from_driver(-1), None);
}

#[test]
fn priorities_clamp_into_the_range_even_when_reversed() {
    let range = PriorityRange {
        greatest: -5,
        least: 0,
    };
    assert_eq!(range.clamp(-9), -5);
    assert_eq!(range.clamp(3), 0);
    assert_eq!(range.clamp(-2), -2);
    let reversed = PriorityRange {
        greatest: 0,
        least: -5,
    };
    assert_eq!(reversed.clamp(-9), -5);
    let none = PriorityRange {
        greatest: 0,
        least: 0,
    };
    assert_eq!(none.clamp(-3), 0);
}

#[test]
fn c_buffers_read_with_or_without_a_nul() {
    assert_eq!(c_buffer_text(b"NVIDIA H200\0junk"), "NVIDIA H200");
    assert_eq!(c_buffer_text(b"no-nul"), "no-nul");
}

#[test]
fn uuids_format_as_nvml_names_them() {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    for (i, b) in uuid.bytes.iter_mut().enumerate() {
        *b = (i as u8 * 17) as c_char;
    }
    assert_eq!(nvml_uuid(&uuid), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

fn ready_probe() -> Probe {
    Probe {
        driver: DriverStatus::Ready {
            cuda_version: CudaVersion {
                major: 13,
                minor: 0,
            },
            device_count: 1,
            devices: vec![DeviceInfo {
                ordinal: 0,
                name: "NVIDIA H200".into(),
                uuid: Some("GPU-00112233-4455-6677-8899-aabbccddeeff".into()),
                pci_bus_id: Some("00000000:3B:00.0".into()),
                compute_capability: ComputeCapability { major: 9, minor: 0 },
                total_memory_bytes: 150_000_000_000,
                used_memory_bytes: Some(1 << 30),
                multiprocessors: 132,
                stream_priorities: Some(PriorityRange {
                    greatest: -5,
                    least: 0,
                }),
            }],
        },
        nvidia_driver_version: Some("580.65.06".into()),
        cufft: true,
        nvrtc: false,
        libraries: vec![],
        warnings: vec![],
    }
}

#[test]
fn a_ready_probe_reads_well() {
    let text = ready_probe().to_string();
    for want in [
        "NVIDIA driver 580.65.06, CUDA 13.0",
        "1 device\n",
        "gpu:0  NVIDIA H200",
        "compute capability 9.0, 132 SMs, 139.7 GiB memory (1.0 GiB in use)",
        "PCI 00000000:3B:00.0, stream priorities -5 (most urgent) to 0",
        "libraries: cuFFT found, NVRTC not found",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    assert_eq!(ready_probe().unavailable_reason(), None);
}

#[test]
fn a_missing_driver_reads_well_and_serialises_tagged() {
    let probe = Probe {
        driver: DriverStatus::NotFound {
            reason: "libcuda not found (loader path: no libcuda.so.1 on it)".into(),
        },
        nvidia_driver_version: None,
        cufft: false,
        nvrtc: true,
        libraries: vec![LibraryReport {
            name: "libcuda".into(),
            loaded: None,
            file: None,
            version: None,
            searched: vec![kplace_cuda_libs::Attempt {
                place: "loader path".into(),
                result: "no libcuda.so.1 on it".into(),
            }],
            warnings: vec![],
        }],
        warnings: vec![],
    };
    assert_eq!(
        probe.to_string(),
        "no CUDA driver found (libcuda not found: see below)\n\
             libraries: cuFFT not found, NVRTC found\n  \
             libcuda: not found, looked in:\n      \
             loader path: no libcuda.so.1 on it\n"
    );
    assert!(probe.devices().is_empty());
    let json = serde_json::to_value(&probe).expect("a probe serialises");
    assert_eq!(json["driver"]["status"], "not_found");
    assert_eq!(json["nvrtc"], true);
    let libcuda = &json["libraries"][0];
    assert_eq!(libcuda["name"], "libcuda");
    assert!(libcuda["loaded"].is_null() && libcuda["version"].is_null());
    assert_eq!(libcuda["searched"][0]["place"], "loader path");
    assert_eq!(libcuda["searched"][0]["result"], "no libcuda.so.1 on it");
    let json = serde_json::to_value(ready_probe()).expect("a probe serialises");
    assert_eq!(json["driver"]["status"], "ready");
    assert_eq!(
        json["driver"]["devices"][0]["compute_capability"]["major"],
        9
    );
}
