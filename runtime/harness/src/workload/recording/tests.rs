use super::*;
use crate::workload::synthesis::synthesize;
use crate::workload::synthesis::tests::tones;
use kplace_core::model::graph::Overrides;

fn graph(dtype: &str) -> Graph {
    crate::workload::synthesis::tests::graph(dtype, "")
}

#[test]
fn a_recording_reads_back_as_written_with_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let sigmf = [
        "ci8", "ci16", "cf32", "cf64", "i8", "i16", "i32", "f32", "f64",
    ];
    for dtype in sigmf {
        let g = graph(dtype);
        let frames = synthesize(&g, 3, &tones()).unwrap();
        let path = dir.path().join(format!("r-{dtype}.sigmf-data"));
        let (data, meta) = write(&path, &g, &frames, Some(1e6), "test").unwrap();
        assert!(data.is_file() && meta.is_file());
        let r = Recording::load(&meta, &g).unwrap();
        assert_eq!(&r.frames[..], &frames[..]);
        assert_eq!(r.sample_rate, Some(1e6));
        let (described, tensor) = Recording::load_described(&data).unwrap();
        assert_eq!(&described.frames[..], &frames[..]);
        assert_eq!(
            (tensor.dtype, &tensor.shape[..]),
            (g.tensor(g.source.tensor).dtype, &[4u64, 8][..])
        );
        assert_eq!(
            r.frame_period(g.tensor(g.source.tensor)),
            Some(std::time::Duration::from_micros(32))
        );
    }
}

#[test]
fn a_half_precision_source_has_no_sigmf_type() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in ["f16", "cf16", "bf16"] {
        let g = graph(dtype);
        let frames = synthesize(&g, 1, &tones()).unwrap();
        let path = dir.path().join("h.sigmf-data");
        let e = write(&path, &g, &frames, Some(1e6), "test")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("is {dtype}, which SigMF has no type for")),
            "{e}"
        );
    }
}

#[test]
fn a_recording_that_disagrees_with_the_graph_is_named_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let g = graph("ci16");
    let frames = synthesize(&g, 2, &tones()).unwrap();
    let path = dir.path().join("r.sigmf-data");
    write(&path, &g, &frames, None, "test").unwrap();
    let e = Recording::load(&path, &graph("cf32"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("core:datatype ci16_le") && e.contains("cf32_le"),
        "{e}"
    );
    let bigger = Overrides {
        dims: vec![("N".into(), 16)],
        params: Vec::new(),
    };
    let text = "name: g\ndims: {N: 8, M: 4}\nsource: {tensor: x, packet_axis: 0}\n\
         tensors:\n  - {name: x, dtype: ci16, shape: [M, N]}\n  - {name: y, dtype: f32, shape: [M, N]}\n\
         stages:\n  - {name: s, kernel: k, inputs: [x], outputs: [y]}\nsinks: [y]\n";
    let g16 = Graph::parse(text, Path::new("g.yaml"), &bigger).unwrap();
    let e = Recording::load(&path, &g16).unwrap_err().to_string();
    assert!(
        e.contains("[4, 8] (kplace:frame_shape)") && e.contains("N=16"),
        "{e}"
    );
    // Without metadata, only the length is checked.
    let raw = dir.path().join("raw.bin");
    std::fs::write(&raw, &frames.concat()[..100]).unwrap();
    let e = Recording::load(&raw, &g).unwrap_err().to_string();
    assert!(
        e.contains("100 bytes is not a whole number of frames"),
        "{e}"
    );
    std::fs::write(&raw, frames.concat()).unwrap();
    assert_eq!(Recording::load(&raw, &g).unwrap().frames.len(), 2);
    let e = Recording::load_described(&raw).unwrap_err().to_string();
    assert!(e.contains("no SigMF metadata"), "{e}");
    assert!(Recording::load(&dir.path().join("none"), &g).is_err());
}

/// A recording of two frames of `graph("ci16")` (4 x 8) at 1 MS/s in `dir`: its data and
/// metadata files.
fn two_frames(dir: &Path) -> (PathBuf, PathBuf) {
    let g = graph("ci16");
    let frames = synthesize(&g, 2, &tones()).unwrap();
    write(&dir.join("r.sigmf-data"), &g, &frames, Some(1e6), "test").unwrap()
}

#[test]
fn a_sample_rate_out_of_range_is_refused_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (data, meta) = two_frames(dir.path());
    let g = graph("ci16");
    let text = std::fs::read_to_string(&meta).unwrap();
    // A frame of 32 samples lasts 1 ns to 1 day from 3.7e-4 to 3.2e10 samples/s.
    for rate in ["1e-300", "1e300", "0", "-1", "1e-4", "4e10"] {
        let edited = text.replace("1000000.0", rate);
        assert_ne!(edited, text);
        std::fs::write(&meta, edited).unwrap();
        for e in [
            Recording::load(&data, &g).unwrap_err(),
            Recording::load_described(&data).unwrap_err(),
        ] {
            let e = e.to_string();
            assert!(
                e.starts_with(&format!("recording {}: core:sample_rate ", meta.display()))
                    && e.contains("is out of range: a frame of 32 samples per channel must last from 1 ns to 1 day"),
                "{rate}: {e}"
            );
        }
    }
    // The edges of the range are frames of 1 day and of 1 ns.
    for (rate, period) in [
        ("3.2e10", std::time::Duration::from_nanos(1)),
        (
            "0.00037037037037037035",
            std::time::Duration::from_secs(86_400),
        ),
    ] {
        std::fs::write(&meta, text.replace("1000000.0", rate)).unwrap();
        let r = Recording::load(&data, &g).unwrap();
        assert_eq!(r.frame_period(g.tensor(g.source.tensor)), Some(period));
    }
}

#[test]
fn metadata_that_is_there_but_no_regular_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (data, meta) = two_frames(dir.path());
    let g = graph("ci16");
    let refused = |what: &str| {
        for e in [
            Recording::load(&data, &g).unwrap_err(),
            Recording::load_described(&data).unwrap_err(),
        ] {
            let e = e.to_string();
            assert_eq!(
                e,
                format!("recording {}: {what}, not a regular file", meta.display())
            );
        }
        assert!(Recording::described_shape(&data).is_err());
    };
    std::fs::remove_file(&meta).unwrap();
    // Absent: no metadata, and the data is read by the graph's shape alone.
    assert_eq!(Recording::load(&data, &g).unwrap().sample_rate, None);
    // The link to itself.
    std::os::unix::fs::symlink(meta.file_name().unwrap(), &meta).unwrap();
    refused("a loop of symbolic links");
    std::fs::remove_file(&meta).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &meta).unwrap();
    refused("a symbolic link to nothing");
    std::fs::remove_file(&meta).unwrap();
    std::fs::create_dir(&meta).unwrap();
    refused("a directory");
    std::fs::remove_dir(&meta).unwrap();
    mkfifo(&meta);
    refused("a FIFO");
    std::fs::remove_file(&meta).unwrap();
    // A link to a regular file is that file.
    let elsewhere = dir.path().join("elsewhere.json");
    write(
        &dir.path().join("w.sigmf-data"),
        &g,
        &synthesize(&g, 2, &tones()).unwrap(),
        Some(5e5),
        "test",
    )
    .unwrap();
    std::fs::rename(dir.path().join("w.sigmf-meta"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &meta).unwrap();
    assert_eq!(Recording::load(&data, &g).unwrap().sample_rate, Some(5e5));
}

#[test]
fn data_that_is_no_regular_file_is_refused_as_what_it_is_and_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = two_frames(dir.path());
    let g = graph("ci16");
    let refused = |what: &str| {
        let e = Recording::load(&data, &g).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("recording {}: {what}, not a regular file", data.display())
        );
    };
    std::fs::remove_file(&data).unwrap();
    let e = Recording::load(&data, &g).unwrap_err().to_string();
    assert!(e.contains("No such file"), "{e}");
    // A FIFO no one writes to: opened to read, it would block forever.
    mkfifo(&data);
    refused("a FIFO");
    std::fs::remove_file(&data).unwrap();
    std::fs::create_dir(&data).unwrap();
    refused("a directory");
    std::fs::remove_dir(&data).unwrap();
    std::os::unix::fs::symlink(data.file_name().unwrap(), &data).unwrap();
    refused("a loop of symbolic links");
    std::fs::remove_file(&data).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &data).unwrap();
    refused("a character device");
}

/// Makes a FIFO at `path` with the `mkfifo` command.
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn an_array_recording_states_its_channels_and_lasts_its_samples_per_channel() {
    let dir = tempfile::tempdir().unwrap();
    let parse = |source: &str| {
        let text = format!(
            "name: g\ndims: {{N: 8, M: 4}}\nsource: {{tensor: x, packet_axis: 0{source}}}\n\
             tensors:\n  - {{name: x, dtype: cf32, shape: [M, N]}}\n\
             stages: []\nsinks: [x]\n"
        );
        Graph::parse(&text, Path::new("g.yaml"), &Overrides::default()).unwrap()
    };
    // 4 snapshots of 8 channels.
    let array = parse(", channel_axis: 1");
    let frames = synthesize(&array, 2, &tones()).unwrap();
    let path = dir.path().join("array.sigmf-data");
    let (_, meta) = write(&path, &array, &frames, Some(1e6), "test").unwrap();
    let text = std::fs::read_to_string(meta).unwrap();
    assert!(text.contains("\"core:num_channels\": 8"), "{text}");
    let r = Recording::load(&path, &array).unwrap();
    assert_eq!(r.channels, 8);
    let four_samples = Some(std::time::Duration::from_micros(4));
    assert_eq!(
        r.frame_period(array.tensor(array.source.tensor)),
        four_samples
    );
    let (described, tensor) = Recording::load_described(&path).unwrap();
    assert_eq!(
        (described.channels, described.frame_period(&tensor)),
        (8, four_samples)
    );
    // A graph that states no channel axis would pace it 8 times too slowly: refused.
    let e = Recording::load(&path, &parse("")).unwrap_err().to_string();
    assert!(
        e.contains("holds 8 channels (core:num_channels)") && e.contains("channel_axis"),
        "{e}"
    );
    // Nor may the axis disagree with the metadata.
    let e = Recording::load(&path, &parse(", channel_axis: 0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("says 8 channels") && e.contains("has 4"), "{e}");
}
