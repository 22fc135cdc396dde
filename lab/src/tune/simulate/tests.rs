use super::*;

fn cpu_stage(preds: Vec<usize>, launches: u32, ms: f64, streamed: bool) -> SimStage {
    SimStage {
        streamed,
        preds,
        launches,
        host_ms_per_launch: ms / f64::from(launches),
        ..SimStage::default()
    }
}

fn pipeline(stages: Vec<SimStage>, workers: usize, slots: usize) -> SimPipeline {
    SimPipeline {
        stages,
        workers,
        slots,
        source_ms: 0.0,
        collector_ms: 0.0,
        latency_ms: 0.0,
        slot_ms: 0.0,
    }
}

#[test]
fn one_worker_runs_a_chain_back_to_back() {
    let p = pipeline(
        vec![
            cpu_stage(vec![], 4, 2.0, true),
            cpu_stage(vec![0], 1, 3.0, false),
        ],
        1,
        2,
    );
    let out = run(&p, Arrivals::Replay, 200, 20);
    assert!((out.rate - 200.0).abs() < 1.0, "{out:?}");
    assert!(out.busy.workers > 0.99, "{out:?}");
}

#[test]
fn two_workers_split_the_tiles_and_overlap_frames() {
    let p = pipeline(
        vec![
            cpu_stage(vec![], 4, 2.0, true),
            cpu_stage(vec![0], 1, 2.0, false),
        ],
        2,
        4,
    );
    let out = run(&p, Arrivals::Replay, 400, 40);
    assert!((out.rate - 500.0).abs() < 5.0, "{out:?}");
}

#[test]
fn a_gpu_stage_overlaps_the_cpu_and_its_kernels_queue_on_the_device() {
    let gpu = SimStage {
        on_gpu: true,
        launches: 1,
        host_ms_per_launch: 0.01,
        kernel_ms_per_launch: 3.0,
        upload_ms: 0.5,
        download_ms: 0.5,
        ..SimStage::default()
    };
    let p = pipeline(vec![gpu, cpu_stage(vec![0], 1, 1.0, false)], 1, 4);
    let out = run(&p, Arrivals::Replay, 300, 30);
    // The GPU's kernels are the busiest resource: a frame every 3 ms.
    assert!((out.rate - 1000.0 / 3.0).abs() < 3.0, "{out:?}");
    assert!(out.busy.gpu > 0.98, "{out:?}");
}

#[test]
fn a_paced_stream_beyond_the_pipeline_drops_frames_and_one_within_keeps_up() {
    let whole = SimStage {
        after_frame: true,
        ..cpu_stage(vec![], 1, 2.0, false)
    };
    let p = pipeline(vec![whole], 1, 2);
    let fast = run(&p, Arrivals::Paced { period_ms: 1.5 }, 200, 20);
    assert!(fast.dropped > 0, "{fast:?}");
    let slow = run(&p, Arrivals::Paced { period_ms: 2.5 }, 200, 20);
    assert_eq!(slow.dropped, 0, "{slow:?}");
    assert!((slow.latency_p50_ms - 2.0).abs() < 1e-6, "{slow:?}");
}

/// A stateful stage runs one frame at a time: four workers give it no more than one, the
/// stages around it still overlap, and frames dropped for want of a slot pass their turn.
#[test]
fn a_stateful_stage_runs_one_frame_at_a_time_and_dropped_frames_pass_their_turn() {
    let first = SimStage {
        after_frame: true,
        ..cpu_stage(vec![], 1, 1.0, false)
    };
    let stateful = SimStage {
        serial: true,
        ..cpu_stage(vec![0], 1, 2.0, false)
    };
    let free = cpu_stage(vec![0], 1, 2.0, false);
    let serial = run(
        &pipeline(vec![first.clone(), stateful], 4, 8),
        Arrivals::Replay,
        400,
        40,
    );
    assert!(
        (serial.rate - 500.0).abs() < 5.0,
        "one frame per 2 ms: {serial:?}"
    );
    let parallel = run(
        &pipeline(vec![first, free], 4, 8),
        Arrivals::Replay,
        400,
        40,
    );
    assert!(
        parallel.rate > 1200.0,
        "without state, the workers share it: {parallel:?}"
    );

    let stateful = SimStage {
        serial: true,
        after_frame: true,
        ..cpu_stage(vec![], 1, 2.0, false)
    };
    let p = pipeline(vec![stateful], 4, 2);
    let out = run(&p, Arrivals::Paced { period_ms: 1.5 }, 200, 20);
    assert!(out.dropped > 0, "{out:?}");
    assert!(out.rate > 400.0, "the frames that begin still run: {out:?}");
}
