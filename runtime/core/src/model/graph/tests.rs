use super::*;

const GOOD: &str = "name: g
dims: {N: 64, M: 16}
source: {tensor: iq, packet_axis: 0}
tensors:
  - {name: iq, dtype: ci16, shape: [M, N]}
  - {name: map, dtype: cf32, shape: [N, M]}
  - {name: out, dtype: records, shape: [32]}
stages:
  - name: first
    kernel: k.first
    inputs: [iq]
    outputs: [map]
    split: {axis: 0, tile: 4}
  - name: second
    kernel: k.second
    inputs: [map]
    outputs: [out]
    params: {rows: $N, alpha: 1.5e-3}
sinks: [out]
";

fn parse(text: &str, overrides: &Overrides) -> Result<Graph, GraphError> {
    Graph::parse(text, Path::new("graphs/test.yaml"), overrides)
}

fn error(text: &str) -> String {
    parse(text, &Overrides::default()).unwrap_err().to_string()
}

#[test]
fn binds_symbols_sizes_producers_and_params() {
    let g = parse(GOOD, &Overrides::default()).unwrap();
    assert_eq!(g.tensors[0].shape, [16, 64]);
    assert_eq!(g.tensors[0].bytes, 16 * 64 * 4);
    assert_eq!(g.tensors[2].bytes, 16 + 32 * 12);
    assert_eq!(g.tensors[1].producer, Producer::Stage(StageId(0)));
    assert_eq!(g.tensors[0].producer, Producer::Source);
    assert_eq!(g.stages[0].split, Some(Split { axis: 0, tile: 4 }));
    assert_eq!(
        g.stages[1].params,
        [
            ("alpha".to_string(), "1.5e-3".to_string()),
            ("rows".into(), "64".into())
        ]
    );
    assert_eq!(g.predecessors(StageId(1)), [StageId(0)]);
    assert_eq!(g.source.packets(&g), 16);
    assert_eq!(g.source.packet_bytes(&g), 64 * 4);
    assert_eq!(g.stages[1].line, 14);
}

#[test]
fn overrides_replace_dims_and_params() {
    let o = Overrides {
        dims: vec![("N".into(), 128), ("M".into(), 32)],
        params: vec![("second".into(), "alpha".into(), "2".into())],
    };
    let g = parse(GOOD, &o).unwrap();
    assert_eq!(g.tensors[0].shape, [32, 128]);
    assert_eq!(
        g.stages[1].params[0],
        ("alpha".to_string(), "2".to_string())
    );
    assert_eq!(
        g.stages[1].params[1],
        ("rows".to_string(), "128".to_string()),
        "symbols bind after overrides"
    );

    let e = parse(
        GOOD,
        &Overrides {
            dims: vec![("K".into(), 1)],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("no dimension K") && e.to_string().contains("M, N"),
        "{e}"
    );
    let e = parse(
        GOOD,
        &Overrides {
            params: vec![("third".into(), "x".into(), "1".into())],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("--set third.x") && e.to_string().contains("no stage third"),
        "{e}"
    );
}

#[test]
fn a_cpi_the_tiles_do_not_divide_is_refused() {
    let o = Overrides {
        dims: vec![("M".into(), 18)],
        ..Default::default()
    };
    let e = parse(GOOD, &o).unwrap_err().to_string();
    assert!(
        e.contains("graphs/test.yaml:13:")
            && e.contains("tiles of 4 must divide")
            && e.contains("(18)"),
        "{e}"
    );
}

#[test]
fn unknown_fields_are_named_with_line_and_column() {
    let e = error(&GOOD.replace("    params: {", "    parms: {"));
    assert!(
        e.contains("graphs/test.yaml") && e.contains("line 18") && e.contains("parms"),
        "{e}"
    );
    let e = error(&GOOD.replace("name: g\n", "name: g\ncolour: blue\n"));
    assert!(e.contains("line 2") && e.contains("colour"), "{e}");
}

#[test]
fn malformed_yaml_is_reported_with_its_place() {
    let e = error("name: g\nstages: [\n");
    assert!(e.contains("graphs/test.yaml") && e.contains("line"), "{e}");
}

#[test]
fn structural_errors_name_their_place() {
    let e = error(&GOOD.replace("inputs: [map]", "inputs: [mapp]"));
    assert!(
        e.contains("graphs/test.yaml:16:14") && e.contains("unknown tensor mapp"),
        "{e}"
    );
    let e = error(&GOOD.replace("dtype: cf32", "dtype: c64"));
    assert!(
        e.contains("graphs/test.yaml:6:") && e.contains("unknown dtype c64") && e.contains("ci16"),
        "{e}"
    );
    let e = error(&GOOD.replace("shape: [N, M]", "shape: [N, K]"));
    assert!(e.contains("axis K: K is not a declared dimension"), "{e}");
    let e = error(&GOOD.replace("name: second", "name: first"));
    assert!(e.contains("stage first is declared twice"), "{e}");
    let e = error(&GOOD.replace("outputs: [out]", "outputs: [map]"));
    assert!(
        e.contains("tensor map has a second writer: stage second"),
        "{e}"
    );
    let e = error(
        &GOOD
            .replace("sinks: [out]", "sinks: [iq]")
            .replace("outputs: [out]", "outputs: [map2]"),
    );
    assert!(e.contains("unknown tensor map2"), "{e}");
    let e = error(&GOOD.replace("split: {axis: 0, tile: 4}", "split: {axis: 2, tile: 4}"));
    assert!(e.contains("split axis 2 is out of range"), "{e}");
    let e = error(&GOOD.replace("packet_axis: 0", "packet_axis: 1"));
    assert!(e.contains("packet_axis must be 0"), "{e}");
    let e = error(&GOOD.replace("rows: $N", "rows: $Q"));
    assert!(e.contains("unknown dimension Q"), "{e}");
}

#[test]
fn stages_must_follow_their_producers() {
    let swapped = "name: g
dims: {N: 8}
source: {tensor: a, packet_axis: 0}
tensors:
  - {name: a, dtype: f32, shape: [N]}
  - {name: b, dtype: f32, shape: [N]}
  - {name: c, dtype: f32, shape: [N]}
stages:
  - {name: late, kernel: k, inputs: [b], outputs: [c]}
  - {name: early, kernel: k, inputs: [a], outputs: [b]}
sinks: [c]
";
    let e = error(swapped);
    assert!(e.contains("stage late reads tensor b before"), "{e}");
    let unwritten = swapped
        .replace(
            "  - {name: late, kernel: k, inputs: [b], outputs: [c]}\n",
            "",
        )
        .replace("sinks: [c]", "sinks: [b]");
    let e = error(&unwritten);
    assert!(e.contains("tensor c is never written"), "{e}");
}

#[test]
fn a_frame_shape_binds_the_dimensions_the_source_names_innermost_first() {
    let text = "name: g
dims: {C: 8, S: 4}
source: {tensor: x, packet_axis: 0}
tensors:
  - {name: x, dtype: f32, shape: [S, 2, C]}
  - {name: y, dtype: f32, shape: [C]}
stages:
  - {name: s, kernel: k, inputs: [x], outputs: [y]}
sinks: [y]
";
    let graph = parse(text, &Overrides::default()).unwrap();
    assert_eq!(
        graph.source_dims,
        [Some("S".to_string()), None, Some("C".to_string())]
    );
    assert_eq!(
        graph.bind_source_shape(&[64, 2, 12]).unwrap(),
        [("S".to_string(), 12), ("C".to_string(), 64)]
    );
    let e = graph
        .bind_source_shape(&[64, 3, 12])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "axis 1 of the source x is 2 in the graph file, not 3");
    let e = graph.bind_source_shape(&[64, 12]).unwrap_err().to_string();
    assert_eq!(
        e,
        "a frame shape of 2 dimensions for the source x, which has 3 ([S, 2, C])"
    );
    let square = parse(
        &text.replace("[S, 2, C]", "[C, 2, C]"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(
        square
            .bind_source_shape(&[5, 2, 6])
            .unwrap_err()
            .to_string(),
        "the frame shape gives dimension C both 6 and 5"
    );
    assert_eq!(
        square.bind_source_shape(&[5, 2, 5]).unwrap(),
        [("C".to_string(), 5)]
    );
}

#[test]
fn dimensions_derive_from_others_and_follow_their_overrides() {
    let text = "name: g
dims:
  N: 64
  D: 4
  K: N/D
  L: (N - 8)/D + 1
source: {tensor: x, packet_axis: 0}
tensors:
  - {name: x, dtype: f32, shape: [M, N]}
  - {name: y, dtype: f32, shape: [M, K]}
  - {name: z, dtype: f32, shape: [N / 2 * M]}
stages:
  - {name: s, kernel: k, inputs: [x], outputs: [y]}
  - {name: t, kernel: k, inputs: [y], outputs: [z], params: {taps: $L}}
sinks: [z]
"
    .replace("dims:\n", "dims:\n  M: 2\n");
    let graph = parse(&text, &Overrides::default()).unwrap();
    assert_eq!(graph.dims["K"], 16);
    assert_eq!(graph.dims["L"], 15);
    assert_eq!(graph.tensors[1].shape, [2, 16]);
    assert_eq!(graph.tensors[2].shape, [64]);
    assert_eq!(
        graph.stages[1].params,
        [("taps".to_string(), "15".to_string())]
    );
    // A derived dimension follows the dimensions it reads.
    let set = |dims: &[(&str, u64)]| Overrides {
        dims: dims.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        params: Vec::new(),
    };
    let bigger = parse(&text, &set(&[("N", 128)])).unwrap();
    assert_eq!((bigger.dims["K"], bigger.tensors[1].shape[1]), (32, 32));
    // It cannot be set itself, and a value it cannot divide is refused at its line.
    let e = parse(&text, &set(&[("K", 8)])).unwrap_err().to_string();
    assert!(
        e.contains("dimension K is derived (K: N/D): set the dimensions it is derived from"),
        "{e}"
    );
    let e = parse(&text, &set(&[("N", 66)])).unwrap_err().to_string();
    assert!(
        e.contains("dimension K (N/D): 66 / 4 is not a whole number"),
        "{e}"
    );
    assert!(e.contains(":6:"), "names K's line: {e}");
    // A source axis written as an expression is fixed, not bound by a frame shape.
    let fixed = parse(
        &text.replace("shape: [M, N]}", "shape: [M, N/D]}"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(fixed.source_dims, [Some("M".to_string()), None]);
    assert_eq!(fixed.tensors[0].shape, [2, 16]);
    // Cycles, unknown names and malformed expressions are named.
    for (dims, want) in [
        ("  K: L+1\n  L: K*2\n", "depends on itself through K, L"),
        ("  K: Q/2\n", "Q is not a declared dimension"),
        (
            "  K: N/\n",
            "is neither a number nor an expression of other dimensions",
        ),
        ("  K: N-N\n", "dimension K is zero"),
    ] {
        let broken = format!(
            "name: g\ndims:\n  N: 8\n{dims}source: {{tensor: x, packet_axis: 0}}\ntensors:\n  - {{name: x, dtype: f32, shape: [N]}}\nstages: []\nsinks: [x]\n"
        );
        let e = parse(&broken, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{dims}: {e}");
    }
}

#[test]
fn list_and_matrix_parameters_reach_kernels_as_text() {
    let text = GOOD.replace(
        "params: {rows: $N, alpha: 1.5e-3}",
        "params:\n      angles: [-30, 0, 14.4775]\n      taps: [[1.0e-3, 2], [$M, \"x y\"]]\n      \
         flag: true\n      alpha: 0123",
    );
    let g = parse(&text, &Overrides::default()).unwrap();
    assert_eq!(
        g.stages[1].params,
        [
            ("alpha".to_string(), "0123".to_string()),
            ("angles".into(), "-30, 0, 14.4775".into()),
            ("flag".into(), "true".into()),
            ("taps".into(), "1.0e-3, 2; 16, x y".into()),
        ]
    );
    for (value, phrase) in [
        ("[[[1]]]", "lists nest at most two deep"),
        ("[[1, 2], 3]", "a matrix's rows are lists, each of them"),
        ("[1, $K]", "parameter taps names unknown dimension K"),
    ] {
        let text = GOOD.replace(
            "params: {rows: $N, alpha: 1.5e-3}",
            &format!("params:\n      taps: {value}"),
        );
        let e = error(&text);
        // The line of `taps:`, the column of the value at fault.
        assert!(
            e.contains("graphs/test.yaml:19:") && e.contains(phrase),
            "{value}: {e}"
        );
    }
}

/// An `.npy` file of little-endian float32 values of `shape`, as NumPy writes it.
fn write_npy(path: &Path, shape: &str, values: &[f32]) {
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, kplace_testkit::npy::bytes("<f4", shape, &data)).unwrap();
}

#[test]
fn a_parameter_may_be_an_npy_file_beside_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let taps = [0.1f32, -0.25, 1e-7];
    write_npy(&dir.path().join("taps.npy"), "(3,)", &taps);
    write_npy(
        &dir.path().join("weights.npy"),
        "(2, 2)",
        &[1.0, 2.0, 3.5, -4.0],
    );
    write_npy(&dir.path().join("cube.npy"), "(1, 1, 1)", &[1.0]);
    let graph = dir.path().join("g.yaml");
    let text = GOOD.replace(
        "params: {rows: $N, alpha: 1.5e-3}",
        "params: {taps: {npy: taps.npy}, weights: {npy: weights.npy}}",
    );
    let g = Graph::parse(&text, &graph, &Overrides::default()).unwrap();
    let params = &g.stages[1].params;
    assert_eq!(params[1], ("weights".into(), "1, 2; 3.5, -4".into()));
    // Each value in the shortest text that reads back to it: the kernel's f32 is the file's.
    let read: Vec<f32> = params[0]
        .1
        .split(", ")
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(read, taps);
    for (value, phrase) in [
        ("{npy: missing.npy}", "missing.npy: No such file"),
        (
            "{npy: cube.npy}",
            "cube.npy holds an array of shape [1, 1, 1]",
        ),
        ("{file: taps.npy}", "unknown key file"),
        ("[{npy: taps.npy}]", "an npy file is a whole value"),
    ] {
        let text = GOOD.replace(
            "params: {rows: $N, alpha: 1.5e-3}",
            &format!("params:\n      taps: {value}"),
        );
        let e = Graph::parse(&text, &graph, &Overrides::default())
            .unwrap_err()
            .to_string();
        // The file and the line of `taps:` (a syntax error says `line 19`).
        assert!(
            e.contains("g.yaml") && (e.contains(":19:") || e.contains("line 19")),
            "{value}: {e}"
        );
        assert!(e.contains(phrase), "{value}: {e}");
    }
}

/// A graph whose stage `scale` reads the frame and a constant `w` of `[N]` from `w.npy`.
const CONSTANT: &str = "name: c
dims: {N: 4, M: 2}
source: {tensor: x, packet_axis: 0}
tensors:
  - {name: x, dtype: f32, shape: [M, N]}
  - {name: w, dtype: cf32, shape: [N], npy: w.npy}
  - {name: y, dtype: f32, shape: [M, N]}
stages:
  - {name: scale, kernel: k.scale, inputs: [x, w], outputs: [y]}
sinks: [y]
";

#[test]
fn a_constant_tensor_is_read_from_its_npy_file_and_checked_against_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let values: Vec<u8> = (0..8)
        .flat_map(|i| (i as f32 - 2.5).to_le_bytes())
        .collect();
    let write = |descr: &str, shape: &str, data: &[u8]| {
        let bytes = kplace_testkit::npy::bytes(descr, shape, data);
        std::fs::write(dir.path().join("w.npy"), bytes).unwrap();
    };
    write("<c8", "(4,)", &values);
    let g = Graph::parse(CONSTANT, &path, &Overrides::default()).unwrap();
    let w = TensorId(1);
    assert_eq!(g.tensor(w).producer, Producer::Constant);
    let constant = g.constant(w).expect("w is a constant");
    assert_eq!(
        (constant.path.clone(), &constant.data[..]),
        (dir.path().join("w.npy"), &values[..])
    );
    assert_eq!(g.predecessors(StageId(0)), []);
    assert!(g.constant(TensorId(0)).is_none());

    // The file must be the tensor's type and shape, exactly; each refusal names the file, the
    // tensor and the line of its `npy:`.
    let refused = |descr: &str, shape: &str, data: &[u8], phrase: &str| {
        write(descr, shape, data);
        let e = Graph::parse(CONSTANT, &path, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.yaml:6:") && e.contains("w.npy"), "{e}");
        assert!(
            e.contains("tensor w (cf32 [4])") && e.contains(phrase),
            "{e}"
        );
    };
    refused(
        "<f4",
        "(8,)",
        &values,
        "element type '<f4', but a cf32 tensor is stored as '<c8'",
    );
    refused(
        "<c8",
        "(2, 2)",
        &values,
        "shape [2, 2], but the tensor is stored as [4]",
    );
    refused(
        "<c8",
        "(4,)",
        &values[..24],
        "32 bytes of data, but 24 bytes follow it",
    );
    std::fs::remove_file(dir.path().join("w.npy")).unwrap();
    let e = Graph::parse(CONSTANT, &path, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("w.npy: No such file"), "{e}");
}

#[test]
fn a_constant_is_only_read_and_bounded_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let data: Vec<u8> = (0..32).collect();
    std::fs::write(
        dir.path().join("w.npy"),
        kplace_testkit::npy::bytes("<c8", "(4,)", &data),
    )
    .unwrap();
    for (from, to, phrase) in [
        (
            "outputs: [y]}",
            "outputs: [w]}",
            "tensor w is a constant (its npy file's contents) stage scale writes it",
        ),
        ("sinks: [y]", "sinks: [w]", "sink w is a constant"),
        ("tensor: x,", "tensor: w,", "source tensor w is a constant"),
        (
            "outputs: [y]}",
            "outputs: [y], split: {axis: 0, tile: 1}}",
            "tiles are along its first input",
        ),
        (
            "shape: [N], npy",
            "shape: [N, 16777216], npy",
            "a constant holds at most 256 MiB; this one is 536870912 bytes",
        ),
        (
            "dtype: cf32, shape: [N], npy",
            "dtype: records, shape: [N], npy",
            "a constant tensor has a numeric element type",
        ),
    ] {
        let text = CONSTANT.replace(from, to);
        let text = if phrase.contains("tiles") {
            text.replace("inputs: [x, w]", "inputs: [w, x]")
        } else {
            text
        };
        let e = Graph::parse(&text, &path, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(phrase) && e.contains("c.yaml:"), "{to}: {e}");
    }
}
