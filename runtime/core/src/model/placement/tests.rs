use super::*;

#[test]
fn an_empty_lib_dir_is_unset() {
    let exe = Path::new("/opt/kplace/bin/kplace");
    let install = [
        PathBuf::from("/opt/kplace/lib/kplace"),
        PathBuf::from("/opt/kplace/bin"),
        PathBuf::from("/opt/kplace"),
    ];
    assert_eq!(search_dirs(Some("".into()), Some(exe)), install);
    assert_eq!(search_dirs(None, Some(exe)), install);
    assert_eq!(
        search_dirs(Some("/libs".into()), Some(exe))[0],
        PathBuf::from("/libs")
    );
}

#[test]
fn a_bare_library_name_is_found_beside_the_placement_or_where_kplace_looks() {
    let dir = tempfile::tempdir().unwrap();
    // Not beside the placement and not installed: the path beside it, for the loader to
    // name in its error.
    assert_eq!(
        resolve_library(dir.path(), "libnone.so"),
        dir.path().join("libnone.so")
    );
    std::fs::write(dir.path().join("libk.so"), b"").unwrap();
    assert_eq!(
        resolve_library(dir.path(), "libk.so"),
        dir.path().join("libk.so")
    );
    // A path with a directory is always relative to the placement.
    assert_eq!(
        resolve_library(dir.path(), "sub/libk.so"),
        dir.path().join("sub/libk.so")
    );
    // The test binary's own directory is searched: a file there is found.
    let exe_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let name = format!("libkplace-test-{}.so", std::process::id());
    std::fs::write(exe_dir.join(&name), b"").unwrap();
    let found = resolve_library(dir.path(), &name);
    std::fs::remove_file(exe_dir.join(&name)).unwrap();
    assert_eq!(found, exe_dir.join(&name));
}

#[test]
fn auto_slots_buffer_a_stated_time_of_stream_within_bounds() {
    let p = parse("name: t\nstages: {a: cpu}\nruntime: {slots: auto}\n").unwrap();
    let mut runtime = p.runtime;
    assert_eq!(runtime.slots, AUTO_SLOTS_MIN, "the least until sized");
    assert_eq!(
        runtime.auto_slots,
        Some(AutoSlots {
            buffer: DEFAULT_SLOT_BUFFER,
            frame_period: None
        })
    );
    let ms = Duration::from_micros;
    // 50 ms at 6.4 ms a frame (1024x128 in real time): 8 slots.
    runtime.size_slots(ms(6_400));
    assert_eq!(runtime.slots, 8);
    assert_eq!(
        runtime.describe_slots(),
        "8 slots (auto: 50 ms of stream at 6.400 ms a frame, 4 to 64)"
    );
    // 600 CPI/s: 30 slots; 102.4 ms a frame (4096x512): the least, 4; a flood: the most.
    runtime.size_slots(Duration::from_secs_f64(1.0 / 600.0));
    assert_eq!(runtime.slots, 30);
    runtime.size_slots(ms(102_400));
    assert_eq!(runtime.slots, AUTO_SLOTS_MIN);
    runtime.size_slots(ms(10));
    assert_eq!(runtime.slots, AUTO_SLOTS_MAX);
    runtime.size_slots(Duration::ZERO);
    assert_eq!(runtime.slots, AUTO_SLOTS_MAX);

    let p =
        parse("name: t\nstages: {a: cpu}\nruntime: {slots: auto, slot_buffer_ms: 20}\n").unwrap();
    let mut runtime = p.runtime;
    runtime.size_slots(ms(2_000));
    assert_eq!(runtime.slots, 10);

    // A fixed count stays fixed.
    let mut fixed = parse("name: t\nstages: {a: cpu}\nruntime: {slots: 6}\n")
        .unwrap()
        .runtime;
    fixed.size_slots(ms(1_000));
    assert_eq!((fixed.slots, fixed.auto_slots), (6, None));
    assert_eq!(fixed.describe_slots(), "6 slots");
}

fn parse(text: &str) -> Result<Placement, PlacementError> {
    Placement::parse(text, Path::new("placements/test.yaml"))
}

#[test]
fn short_and_long_stage_forms() {
    let p = parse(
            "name: t\nstages:\n  a: cpu\n  b: {device: gpu:1, priority: -1, library: lib.so}\n  c: gpu\n",
        )
        .unwrap();
    assert_eq!(p.stages["a"].device, Device::Cpu);
    assert_eq!(p.stages["b"].device, Device::Gpu(1));
    assert_eq!(p.stages["b"].priority, -1);
    assert_eq!(
        p.stages["b"].library.as_deref(),
        Some(Path::new("placements/lib.so"))
    );
    assert_eq!(p.stages["c"].device, Device::Gpu(0));
    assert_eq!((p.stages["a"].tile, p.stages["b"].tile), (None, None));
    assert_eq!(p.runtime, RuntimeSettings::default());
    let tiled = parse("name: t\nstages:\n  a: {device: gpu, tile: 64}\n").unwrap();
    assert_eq!(tiled.stages["a"].tile, Some(64));
    let bare = Placement::parse(
        "name: t\nlibraries: {cpu: libk.so}\nstages: {a: cpu}\n",
        Path::new("p.yaml"),
    )
    .unwrap();
    assert_eq!(
        bare.libraries["cpu"],
        Path::new("./libk.so"),
        "never a bare name the loader would search for"
    );
}

#[test]
fn a_stage_on_python_runs_on_the_cpu_from_a_python_module() {
    let p = parse(
        "name: t\nlibraries: {python: k.py}\nstages:\n  a: python\n  b: {device: python, library: own.py}\n  c: cpu\n",
    )
    .unwrap();
    assert_eq!(p.stages["a"].device, Device::Cpu);
    assert_eq!(
        p.stages["a"].library.as_deref(),
        Some(Path::new("placements/k.py"))
    );
    assert_eq!(
        p.stages["b"].library.as_deref(),
        Some(Path::new("placements/own.py"))
    );
    assert_eq!(
        p.stages["c"].library, None,
        "a cpu stage keeps the cpu library"
    );
    for (text, line, says) in [
        (
            "name: t\nstages:\n  a: python\n",
            "test.yaml:3:",
            "stage a is placed on python, which needs the Python module of its kernel",
        ),
        (
            "name: t\nstages:\n  a: {device: python, library: libk.so}\n",
            "test.yaml:3:",
            "stage a is placed on python, but its library placements/libk.so is not a Python module",
        ),
        (
            "name: t\nlibraries: {python: libk.so}\nstages:\n  a: cpu\n",
            "test.yaml:2:",
            "libraries: python names libk.so, which is not a Python module",
        ),
        (
            "name: t\nstages:\n  a: pyhton\n",
            "test.yaml:3:",
            "unknown device \"pyhton\" (expected cpu, gpu, gpu:N or python)",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(line) && e.contains(says), "{text}: {e}");
    }
}

#[test]
fn errors_name_file_line_and_field() {
    let e = parse("name: t\nstages:\n  a: {device: cpu, prio: 1}\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("placements/test.yaml") && e.contains("line 3") && e.contains("prio"),
        "{e}"
    );
    let e = parse("name: t\nstages:\n  a: tpu\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("placements/test.yaml:3") && e.contains("tpu"),
        "{e}"
    );
    let e = parse("name: t\nstages:\n  a: {device: gpu, tile: 0}\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("placements/test.yaml:3") && e.contains("stage a: tile must be at least 1"),
        "{e}"
    );
    let e = parse("name: t\nstages: {a: cpu}\nruntime: {slots: 0}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("slots"), "{e}");
    for bad in ["-1", "lots", "1.5"] {
        let e = parse(&format!(
            "name: t\nstages: {{a: cpu}}\nruntime: {{slots: {bad}}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("slots") && e.contains("test.yaml"), "{bad}: {e}");
    }
    for bad in ["0", "-5", "20000"] {
        let e = parse(&format!(
            "name: t\nstages: {{a: cpu}}\nruntime: {{slots: auto, slot_buffer_ms: {bad}}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("runtime.slot_buffer_ms must be above 0"),
            "{bad}: {e}"
        );
    }
    let e = parse("name: t\nstages: {a: cpu}\nruntime: {slots: 4, slot_buffer_ms: 20}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("only to slots: auto"), "{e}");
    let graphs = parse("name: t\nstages: {a: cpu}\nruntime: {gpu_graphs: false}\n").unwrap();
    assert!(!graphs.runtime.gpu_graphs, "graphs turned off");
    let spin = parse("name: t\nstages: {a: cpu}\nruntime: {spin_us: 250}\n").unwrap();
    assert_eq!(spin.runtime.spin, Duration::from_micros(250));
    let default = parse("name: t\nstages: {a: cpu}\n").unwrap();
    assert_eq!(
        default.runtime.spin,
        Duration::ZERO,
        "sleeps at once by default"
    );
    assert!(default.runtime.gpu_graphs, "graphs on by default");
    let e = parse("name: t\nstages: {a: cpu}\nruntime: {spin_us: 10001}\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("runtime.spin_us must be at most 10000") && e.contains("10001"),
        "{e}"
    );
    let e = parse("name: t\nstages: {a: cpu}\nruntime: {workers: 2, pin_cores: [0]}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("pin_cores"), "{e}");
}

#[test]
fn alternatives_are_names_or_paths_beside_the_file_each_once_and_bounded() {
    let p = parse(
        "name: t\nstages: {a: cpu}\nalternatives: [all-cpu-pinned, ../other/x.yaml, y.yaml]\n",
    )
    .unwrap();
    assert_eq!(
        p.alternatives,
        [
            PathBuf::from("all-cpu-pinned"),
            PathBuf::from("placements/../other/x.yaml"),
            PathBuf::from("placements/y.yaml"),
        ],
        "a name is looked up later, as --placement does; a path is the file's neighbour"
    );
    assert!(
        parse("name: t\nstages: {a: cpu}\n")
            .unwrap()
            .alternatives
            .is_empty()
    );
    let refused = |list: &str, why: &str| {
        let e = parse(&format!(
            "name: t\nstages: {{a: cpu}}\nalternatives: {list}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("placements/test.yaml:3") && e.contains(why),
            "{list}: {e}"
        );
    };
    refused("[a, a]", "alternatives: a is listed twice");
    refused("[b, t]", "alternatives: t is this placement itself");
    refused("[test]", "alternatives: test is this placement itself");
    refused(
        "[test.yaml]",
        "alternatives: test.yaml is this placement itself",
    );
    refused("[\"\"]", "alternatives: an entry is empty");
    refused(
        "[a, b, c, d, e, f, g, h]",
        "alternatives lists 8 placements; at most 7",
    );
}
