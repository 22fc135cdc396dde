//! The cluster kernel against an independent flood fill over a dense grid, on random sparse
//! detection sets (wrap-around edges and power ties included), and its checks.

mod common;

use std::collections::VecDeque;

use common::*;
use kplace_abi::export::KernelImpl;
use kplace_abi::{Dtype, RecordListHeader};
use kplace_cpu::{Cfar, Cluster};
use kplace_kernels::Detection;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Clusters by flood fill on an `rows x cols` grid: every 8-connected (wrapping) component
/// reports its strongest cell (largest power by `total_cmp`, ties to the smallest
/// (range, Doppler)), sorted by (range, Doppler).
fn flood_fill(rows: usize, cols: usize, detections: &[Detection]) -> Vec<Detection> {
    let mut grid: Vec<Option<Detection>> = vec![None; rows * cols];
    for d in detections {
        grid[d.range_bin as usize * cols + d.doppler_bin as usize] = Some(*d);
    }
    let mut seen = vec![false; rows * cols];
    let mut out = Vec::new();
    for start in 0..rows * cols {
        if grid[start].is_none() || seen[start] {
            continue;
        }
        seen[start] = true;
        let mut queue = VecDeque::from([start]);
        let mut best: Option<Detection> = None;
        while let Some(at) = queue.pop_front() {
            let cell = grid[at].expect("queued cells hold detections");
            let better = match best {
                None => true,
                Some(b) => match cell.power.total_cmp(&b.power) {
                    std::cmp::Ordering::Greater => true,
                    std::cmp::Ordering::Equal => {
                        (cell.range_bin, cell.doppler_bin) < (b.range_bin, b.doppler_bin)
                    }
                    std::cmp::Ordering::Less => false,
                },
            };
            if better {
                best = Some(cell);
            }
            let (r, d) = ((at / cols) as isize, (at % cols) as isize);
            for dr in -1..=1 {
                for dd in -1..=1 {
                    let nr = (r + dr).rem_euclid(rows as isize) as usize;
                    let nd = (d + dd).rem_euclid(cols as isize) as usize;
                    let next = nr * cols + nd;
                    if grid[next].is_some() && !seen[next] {
                        seen[next] = true;
                        queue.push_back(next);
                    }
                }
            }
        }
        out.extend(best);
    }
    out.sort_by_key(|d| (d.range_bin, d.doppler_bin));
    out
}

/// Runs the cluster kernel on `detections` (sorted), with room for `capacity_out` clusters.
fn run(
    rows: usize,
    cols: usize,
    detections: &[Detection],
    capacity_in: u32,
    capacity_out: u32,
) -> (RecordListHeader, Vec<Detection>) {
    let input_desc = desc(Dtype::RECORDS, &[u64::from(capacity_in)]);
    let output_desc = desc(Dtype::RECORDS, &[u64::from(capacity_out)]);
    let (r, c) = (rows.to_string(), cols.to_string());
    let setup = Setup::new(
        &[("range_bins", &r), ("doppler_bins", &c)],
        &[input_desc],
        &[output_desc],
    );
    let kernel: Cluster = setup.create().expect("create");
    let mut input = Buf::for_desc(&input_desc);
    write_list(&mut input, capacity_in, detections);
    let output = Buf::for_desc(&output_desc);
    launch(
        &kernel,
        (input_desc, &input),
        (output_desc, &output),
        whole(u64::from(capacity_in)),
    )
    .expect("launch");
    read_list(&output)
}

/// A random sparse detection set on a `rows x cols` map, sorted; powers from a small set so
/// that ties are common, and extra cells along the edges so components wrap.
fn random_detections(rows: usize, cols: usize, density: f64, seed: u64) -> Vec<Detection> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for r in 0..rows {
        for d in 0..cols {
            let edge = r == 0 || r == rows - 1 || d == 0 || d == cols - 1;
            if rng.random_bool(if edge {
                (3.0 * density).min(1.0)
            } else {
                density
            }) {
                let power = [1.0f32, 2.0, 2.0, 3.0, 7.5][rng.random_range(0..5)];
                out.push(Detection {
                    range_bin: r as u32,
                    doppler_bin: d as u32,
                    power,
                });
            }
        }
    }
    out
}

#[test]
fn random_sparse_sets_match_a_flood_fill() {
    let mut seed = 0;
    for (rows, cols) in [
        (8, 8),
        (16, 12),
        (40, 24),
        (3, 50),
        (64, 128),
        (1, 7),
        (5, 1),
        (2, 2),
    ] {
        for density in [0.02, 0.1, 0.3, 0.6] {
            seed += 1;
            let detections = random_detections(rows, cols, density, seed);
            let want = flood_fill(rows, cols, &detections);
            let capacity = detections.len().max(1) as u32;
            let (header, got) = run(rows, cols, &detections, capacity + 3, capacity);
            assert_eq!(header.overflow, 0);
            assert_eq!(header.capacity, capacity);
            assert_eq!(got, want, "{rows} x {cols}, density {density}, seed {seed}");
        }
    }
}

#[test]
fn clusters_join_across_both_wrap_edges() {
    let det = |r: u32, d: u32, p: f32| Detection {
        range_bin: r,
        doppler_bin: d,
        power: p,
    };
    // (0, 0), (0, 15), (9, 0) and (9, 15) touch around the corners of a 10 x 16 map;
    // (5, 0) and (4, 15) touch diagonally across the Doppler edge; (5, 8) is alone.
    let detections = [
        det(0, 0, 1.0),
        det(0, 15, 4.0),
        det(4, 15, 2.0),
        det(5, 0, 3.0),
        det(5, 8, 1.0),
        det(9, 0, 2.0),
        det(9, 15, 4.0),
    ];
    let (_, got) = run(10, 16, &detections, 8, 8);
    // Ties at power 4: the smaller (range, Doppler) wins.
    assert_eq!(got, vec![det(0, 15, 4.0), det(5, 0, 3.0), det(5, 8, 1.0)]);
    assert_eq!(got, flood_fill(10, 16, &detections));
}

#[test]
fn overflow_counts_the_clusters_that_do_not_fit() {
    let detections = random_detections(64, 64, 0.05, 99);
    let want = flood_fill(64, 64, &detections);
    assert!(want.len() > 10);
    for capacity in [0u32, 1, 5, want.len() as u32] {
        let (header, got) = run(64, 64, &detections, detections.len() as u32, capacity);
        let kept = (capacity as usize).min(want.len());
        assert_eq!(header.count as usize, kept);
        assert_eq!(header.overflow as usize, want.len() - kept);
        assert_eq!(got, want[..kept]);
    }
    // An empty input gives an empty output.
    let (header, got) = run(64, 64, &[], 16, 4);
    assert_eq!((header.count, header.overflow, got.len()), (0, 0, 0));
}

#[test]
fn bad_inputs_and_parameters_are_rejected_by_name() {
    let i = desc(Dtype::RECORDS, &[16]);
    let o = desc(Dtype::RECORDS, &[16]);
    let create = |params: &[(&str, &str)]| {
        Setup::new(params, &[i], &[o])
            .create::<Cluster>()
            .map(|_| ())
    };
    assert_error(
        create(&[("doppler_bins", "128")]),
        &["range_bins", "required"],
    );
    assert_error(
        create(&[("range_bins", "1024")]),
        &["doppler_bins", "required"],
    );
    assert_error(
        create(&[("range_bins", "0"), ("doppler_bins", "8")]),
        &["range_bins"],
    );
    assert_error(
        create(&[("range_bins", "8"), ("doppler_bins", "8"), ("radius", "1")]),
        &["unknown parameter radius"],
    );
    assert_error(
        create(&[("range_bins", "x"), ("doppler_bins", "8")]),
        &["range_bins", "\"x\""],
    );
    let wrong = Setup::new(
        &[("range_bins", "8"), ("doppler_bins", "8")],
        &[desc(Dtype::F32, &[8, 8])],
        &[o],
    );
    assert_error(
        wrong.create::<Cluster>().map(|_| ()),
        &["input 0", "records"],
    );

    let setup = Setup::new(&[("range_bins", "8"), ("doppler_bins", "8")], &[i], &[o]);
    let kernel: Cluster = setup.create().expect("create");
    let det = |r: u32, d: u32| Detection {
        range_bin: r,
        doppler_bin: d,
        power: 1.0,
    };
    let try_list = |records: &[Detection]| {
        let mut input = Buf::for_desc(&i);
        write_list(&mut input, 16, records);
        let output = Buf::for_desc(&o);
        launch(&kernel, (i, &input), (o, &output), whole(16))
    };
    assert_error(
        try_list(&[det(1, 2), det(1, 1)]),
        &["input 0", "record 1", "sorted"],
    );
    assert_error(
        try_list(&[det(1, 2), det(1, 2)]),
        &["input 0", "record 1", "duplicates"],
    );
    assert_error(
        try_list(&[det(8, 0)]),
        &["input 0", "record 0", "outside the 8 x 8 map"],
    );
    assert!(try_list(&[det(0, 0), det(7, 7)]).is_ok());

    // A header claiming more records than the list holds is refused.
    let mut input = Buf::for_desc(&i);
    input.slice_mut::<u32>()[..4].copy_from_slice(&[17, 16, 0, 0]);
    let output = Buf::for_desc(&o);
    assert_error(
        launch(&kernel, (i, &input), (o, &output), whole(16)),
        &["input 0", "17 records"],
    );
}

#[test]
fn cfar_then_cluster_reports_one_cell_per_target() {
    // Two blobs of hot cells on a noise floor, one straddling the wrap corner.
    let (rows, cols) = (128usize, 64usize);
    let mut rng = StdRng::seed_from_u64(5);
    let mut map: Vec<f32> = (0..rows * cols)
        .map(|_| (-(1.0 - rng.random::<f64>()).ln() * 100.0) as f32)
        .collect();
    for (r, d, p) in [
        (40, 20, 1e6),
        (40, 21, 4e5),
        (41, 20, 3e5),
        (0, 0, 2e5),
        (127, 63, 9e5),
        (0, 63, 1e5),
    ] {
        map[r * cols + d] = p;
    }
    let map_desc = desc(Dtype::F32, &[rows as u64, cols as u64]);
    let list_desc = desc(Dtype::RECORDS, &[256]);
    let clusters_desc = desc(Dtype::RECORDS, &[16]);
    let cfar: Cfar = Setup::new(&[], &[map_desc], &[list_desc])
        .create()
        .expect("cfar");
    let (r, c) = (rows.to_string(), cols.to_string());
    let cluster: Cluster = Setup::new(
        &[("range_bins", &r), ("doppler_bins", &c)],
        &[list_desc],
        &[clusters_desc],
    )
    .create()
    .expect("cluster");
    let mut map_buf = Buf::for_desc(&map_desc);
    map_buf.slice_mut::<f32>().copy_from_slice(&map);
    let (list, clusters) = (Buf::for_desc(&list_desc), Buf::for_desc(&clusters_desc));
    launch(
        &cfar,
        (map_desc, &map_buf),
        (list_desc, &list),
        whole(rows as u64),
    )
    .expect("cfar launch");
    launch(
        &cluster,
        (list_desc, &list),
        (clusters_desc, &clusters),
        whole(256),
    )
    .expect("cluster launch");
    let (_, got) = read_list(&clusters);
    let cells: Vec<(u32, u32)> = got.iter().map(|d| (d.range_bin, d.doppler_bin)).collect();
    assert_eq!(cells, vec![(40, 20), (127, 63)]);
    assert_eq!(cluster.workspace_bytes(), 256 * 8);
}
