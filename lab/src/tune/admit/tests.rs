use super::*;

/// One pipeline predicted to sustain 1000 frames/s with 2 cores busy and 40% of the GPU, the
/// bus carrying 5000 frames/s up and 20000 down.
fn one() -> Prediction {
    Prediction {
        rate: 1000.0,
        latency_ms: 2.0,
        bottleneck: Resource::Workers,
        limits: vec![
            (Resource::Workers, 1000.0),
            (Resource::Upload, 5000.0),
            (Resource::Download, 20000.0),
        ],
        cores: 2.0,
        host_ms: 2.0,
        gpu_share: 0.4,
    }
}

fn capacity() -> Capacity {
    Capacity {
        cores: 16.0,
        utilization: 1.0,
        device_memory: Some(80 << 30),
        device_bytes_per_pipeline: 4 << 30,
        context_reserve: 512 << 20,
        context_per_pipeline: false,
    }
}

fn demand(rate: f64) -> Demand {
    Demand {
        rate,
        budget_ms: 5.0,
    }
}

#[test]
fn the_fewest_pipelines_any_resource_holds_is_the_answer_named_by_it() {
    // At 500 frames/s a pipeline keeps 1 core busy and 20% of the GPU: the GPU holds 5, the
    // cores 16, the bus 10 up and 40 down, the memory 19 (80 GiB less 512 MiB over 4 GiB).
    let a = admit(&one(), demand(500.0), capacity());
    assert_eq!(a.pipelines, 5);
    let counts: Vec<(Shared, u64)> = a.fits.iter().map(|f| (f.resource, f.pipelines)).collect();
    assert_eq!(
        counts,
        [
            (Shared::Gpu, 5),
            (Shared::Upload, 10),
            (Shared::Cores, 16),
            (Shared::DeviceMemory, 19),
            (Shared::Download, 40),
        ]
    );
    assert_eq!(a.limit().unwrap().resource, Shared::Gpu);
    assert_eq!(a.refusal(5), None);
    let no = a.refusal(6).unwrap();
    assert!(
        no.contains("5 fit by GPU compute") && no.contains("not 6"),
        "{no}"
    );
}

#[test]
fn a_context_per_pipeline_costs_its_reserve_each() {
    let c = Capacity {
        device_memory: Some(10 << 30),
        context_per_pipeline: true,
        ..capacity()
    };
    // 10 GiB over 4.5 GiB each: 2.
    let a = admit(&one(), demand(100.0), c);
    let memory = a
        .fits
        .iter()
        .find(|f| f.resource == Shared::DeviceMemory)
        .unwrap();
    assert_eq!(memory.pipelines, 2);
    // 8.5 GiB: 1 at 4.5 GiB each with a context each, 2 at 4 GiB each beside one context.
    let c = Capacity {
        device_memory: Some(17 << 29),
        ..c
    };
    let shared = Capacity {
        context_per_pipeline: false,
        ..c
    };
    let count = |c| {
        let a = admit(&one(), demand(100.0), c);
        a.fits
            .iter()
            .find(|f| f.resource == Shared::DeviceMemory)
            .unwrap()
            .pipelines
    };
    assert_eq!((count(c), count(shared)), (1, 2));
}

#[test]
fn a_pipeline_that_cannot_keep_up_alone_admits_none_and_says_why() {
    let a = admit(&one(), demand(1500.0), capacity());
    assert_eq!(a.pipelines, 0);
    let why = a.refusal(1).unwrap();
    assert!(
        why.contains("1000.0 frames/s") && why.contains("workers"),
        "{why}"
    );
    let slow = Prediction {
        latency_ms: 9.0,
        ..one()
    };
    let a = admit(&slow, demand(100.0), capacity());
    assert_eq!(a.pipelines, 0);
    assert!(a.refusal(1).unwrap().contains("over the 5.000 ms budget"));
    assert_eq!(admit(&one(), demand(0.0), capacity()).pipelines, 0);
}

#[test]
fn a_cpu_placement_is_bounded_by_cores_alone_and_never_past_the_cap() {
    let cpu = Prediction {
        gpu_share: 0.0,
        limits: vec![(Resource::Workers, 1000.0)],
        ..one()
    };
    let c = Capacity {
        device_memory: None,
        ..capacity()
    };
    let a = admit(&cpu, demand(250.0), c);
    // 0.5 cores each on 16.
    assert_eq!(a.pipelines, 32);
    assert_eq!(a.fits.len(), 1);
    let tiny = admit(&cpu, demand(1.0), c);
    assert_eq!(tiny.pipelines, MAX_PIPELINES);
}

#[test]
fn when_every_resource_holds_the_most_counted_none_runs_out() {
    // A frame a day, and no device memory said: every resource holds more than the cap.
    let unsaid = Capacity {
        device_memory: None,
        ..capacity()
    };
    let a = admit(&one(), demand(1.0 / 86_400.0), unsaid);
    assert_eq!(a.pipelines, MAX_PIPELINES);
    assert!(a.fits.iter().all(|f| f.pipelines == MAX_PIPELINES), "{a:?}");
    assert_eq!(a.limit(), None);
    assert_eq!(
        a.conclusion(),
        "64 pipelines fit, the most kplace admit counts: no resource runs out before"
    );
    assert!(a.fits.iter().all(|f| f.held() == "at least 64 pipelines"));
    assert_eq!(a.refusal(64), None);
    // One resource below the cap is what runs out, though the others are capped: device
    // memory, whatever the rate.
    let small = Capacity {
        device_memory: Some(20 << 30),
        ..capacity()
    };
    let a = admit(&one(), demand(1.0 / 86_400.0), small);
    assert_eq!(a.pipelines, 4);
    assert_eq!(a.limit().map(|f| f.resource), Some(Shared::DeviceMemory));
    assert_eq!(
        a.conclusion(),
        "4 pipelines fit: device memory runs out first"
    );
    assert_eq!(a.limit().unwrap().held(), " 4 pipelines");
    let none = admit(&one(), demand(1500.0), capacity());
    assert!(
        none.conclusion()
            .starts_with("0 pipelines fit: one pipeline alone is predicted"),
        "{}",
        none.conclusion()
    );
}

#[test]
fn a_utilization_below_one_leaves_headroom_on_every_shared_resource() {
    let c = Capacity {
        utilization: 0.5,
        ..capacity()
    };
    let a = admit(&one(), demand(500.0), c);
    let counts: Vec<(Shared, u64)> = a.fits.iter().map(|f| (f.resource, f.pipelines)).collect();
    // Half of each: the GPU 2 (0.5 / 0.2), the bus 5 up and 20 down, the cores 8; memory is
    // not a rate, and keeps its 19.
    assert_eq!(
        counts,
        [
            (Shared::Gpu, 2),
            (Shared::Upload, 5),
            (Shared::Cores, 8),
            (Shared::DeviceMemory, 19),
            (Shared::Download, 20),
        ]
    );
}
