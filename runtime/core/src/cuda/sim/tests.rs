use super::*;

#[test]
fn streams_order_copies_and_events_fence_across_streams() {
    let gpu = SimGpu::with_delay(0, Duration::from_millis(2));
    let a = gpu.create_stream(0).unwrap();
    let b = gpu.create_stream(0).unwrap();
    let event = gpu.create_event().unwrap();
    let host = gpu.alloc_pinned(64).unwrap();
    let back = gpu.alloc_pinned(64).unwrap();
    let dev = gpu.alloc_device(64).unwrap();
    // SAFETY: the blocks are 64 bytes each, and the streams and event this device's own.
    unsafe {
        std::slice::from_raw_parts_mut(host, 64).fill(7);
        gpu.copy_to_device(dev, host, 64, a).unwrap();
        gpu.record(event, a).unwrap();
        assert!(
            !gpu.query(event).unwrap(),
            "the record waits behind a delayed copy"
        );
        gpu.wait(b, event).unwrap();
        gpu.copy_to_host(back, dev, 64, b).unwrap();
        gpu.synchronize(b).unwrap();
        assert!(gpu.query(event).unwrap());
        assert!(std::slice::from_raw_parts(back, 64).iter().all(|&x| x == 7));
        let pageable = [0u8; 64];
        assert!(gpu.copy_to_device(dev, pageable.as_ptr(), 64, a).is_err());
        assert!(gpu.copy_to_device(dev, host, 65, a).is_err());
        gpu.destroy_stream(a);
        gpu.destroy_stream(b);
        gpu.destroy_event(event);
        gpu.free_device(dev);
        gpu.free_pinned(host);
        gpu.free_pinned(back);
    }
    assert_eq!(gpu.allocated_bytes(), 0);
    let stats = gpu.stats();
    assert_eq!(
        (stats.uploads, stats.downloads, stats.records, stats.waits),
        (1, 1, 1, 1)
    );
}

#[test]
fn a_timed_device_times_events_by_its_streams_work_whatever_the_host_does() {
    // Uploads of 1 MB at 1 GB/s (1 ms each) on two streams sharing the one upload
    // engine; the host sleeps between enqueues, and stream b waits for a's uploads.
    let timing = SimTiming {
        upload_bytes_per_s: Some(1e9),
        ..SimTiming::default()
    };
    let gpu = SimGpu::with_timing(0, timing);
    let (a, b) = (gpu.create_stream(0).unwrap(), gpu.create_stream(0).unwrap());
    let events: Vec<Event> = (0..4).map(|_| gpu.create_timing_event().unwrap()).collect();
    let fence = gpu.create_event().unwrap();
    let host = gpu.alloc_pinned(1_000_000).unwrap();
    let dev = gpu.alloc_device(2_000_000).unwrap();
    // SAFETY: the blocks hold the bytes copied; streams and events are this device's own.
    unsafe {
        gpu.record(events[0], a).unwrap();
        gpu.copy_to_device(dev, host, 1_000_000, a).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        gpu.copy_to_device(dev, host, 1_000_000, a).unwrap();
        gpu.record(events[1], a).unwrap();
        gpu.record(fence, a).unwrap();
        gpu.record(events[2], b).unwrap();
        gpu.wait(b, fence).unwrap();
        gpu.copy_to_device(dev.add(1_000_000), host, 1_000_000, b)
            .unwrap();
        gpu.record(events[3], b).unwrap();
        gpu.synchronize(b).unwrap();
        gpu.synchronize(a).unwrap();
        let ms = |x: usize, y: usize| gpu.elapsed_ms(events[x], events[y]).unwrap();
        assert_eq!(
            ms(0, 1),
            2.0,
            "two uploads of 1 ms; the host's 5 ms sleep not counted"
        );
        assert_eq!(
            ms(2, 3),
            1.0,
            "one upload; the wait for stream a not counted"
        );
        assert!(
            gpu.elapsed_ms(fence, events[1]).is_err(),
            "not a timing event"
        );
        for e in events {
            gpu.destroy_event(e);
        }
        gpu.destroy_event(fence);
        gpu.destroy_stream(a);
        gpu.destroy_stream(b);
        gpu.free_device(dev);
        gpu.free_pinned(host);
    }
}

#[test]
fn host_callbacks_run_in_stream_order_and_a_sticky_error_stops_the_device() {
    static ORDER: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    unsafe extern "C" fn note(data: *mut c_void) {
        lock(&ORDER).push(data as usize as u32);
    }
    let gpu = SimGpu::with_delay(0, Duration::from_millis(1));
    let s = gpu.create_stream(0).unwrap();
    // SAFETY: `s` is this device's stream; `note` ignores its pointer but as a number.
    unsafe {
        for i in 1..=3 {
            gpu.call_host(s, note, i as *mut c_void).unwrap();
        }
        gpu.synchronize(s).unwrap();
        assert_eq!(*lock(&ORDER), vec![1, 2, 3]);
        *lock(&gpu.sticky) = Some(gpu.error("kernel", "illegal address"));
        assert!(gpu.check().is_err());
        assert!(gpu.call_host(s, note, 4 as *mut c_void).is_err());
        assert!(gpu.synchronize(s).is_err());
        gpu.destroy_stream(s);
    }
    assert_eq!(*lock(&ORDER), vec![1, 2, 3], "nothing runs after the error");
}

#[test]
fn a_captured_graph_runs_its_work_in_order_each_time_it_is_launched_in_one_call() {
    static ORDER: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    unsafe extern "C" fn note(data: *mut c_void) {
        lock(&ORDER).push(data as usize as u32);
    }
    let gpu = SimGpu::with_delay(0, Duration::from_millis(1));
    let s = gpu.create_stream(0).unwrap();
    let host = gpu.alloc_pinned(64).unwrap();
    let back = gpu.alloc_pinned(64).unwrap();
    let dev = gpu.alloc_device(64).unwrap();
    let fence = gpu.create_event().unwrap();
    // SAFETY: the blocks are 64 bytes each; the stream and event are this device's own, and
    // `note` reads its pointer as a number only.
    unsafe {
        gpu.begin_capture(s).unwrap();
        gpu.copy_to_device(dev, host, 64, s).unwrap();
        gpu.copy_to_host(back, dev, 64, s).unwrap();
        gpu.call_host(s, note, std::ptr::without_provenance_mut(1))
            .unwrap();
        for refused in [
            gpu.record(fence, s).unwrap_err(),
            gpu.wait(s, fence).unwrap_err(),
            gpu.synchronize(s).unwrap_err(),
            gpu.begin_capture(s).unwrap_err(),
        ] {
            assert!(refused.to_string().contains("capturing"), "{refused}");
        }
        let graph = gpu.end_capture(s).unwrap();
        assert!(gpu.end_capture(s).is_err(), "the capture has ended");
        let captured = gpu.stats();
        assert_eq!(
            (
                captured.uploads,
                captured.callbacks,
                captured.driver_calls,
                captured.captured_calls
            ),
            (0, 0, 0, 3),
            "captured, not run: three calls recorded"
        );
        assert!(lock(&ORDER).is_empty());
        for round in 0..2u8 {
            std::slice::from_raw_parts_mut(host, 64).fill(round + 7);
            gpu.launch_graph(graph, s).unwrap();
            gpu.call_host(s, note, std::ptr::without_provenance_mut(2))
                .unwrap();
            gpu.synchronize(s).unwrap();
            assert!(
                std::slice::from_raw_parts(back, 64)
                    .iter()
                    .all(|&x| x == round + 7),
                "round {round}: the graph's copies ran in order, after the host wrote"
            );
        }
        assert_eq!(*lock(&ORDER), vec![1, 2, 1, 2]);
        let stats = gpu.stats();
        assert_eq!(
            (stats.graphs, stats.graph_launches, stats.driver_calls),
            (1, 2, 2 * 2),
            "each launch is one driver call, whatever the graph holds"
        );
        assert_eq!(
            (stats.uploads, stats.downloads, stats.callbacks),
            (2, 2, 4),
            "the graph's work is counted as each launch enqueues it"
        );
        // A graph destroyed while a launch of it is queued still runs that launch.
        gpu.launch_graph(graph, s).unwrap();
        gpu.destroy_graph(graph);
        gpu.synchronize(s).unwrap();
        assert_eq!(lock(&ORDER).len(), 5);
        gpu.destroy_event(fence);
        gpu.destroy_stream(s);
        gpu.free_device(dev);
        gpu.free_pinned(host);
        gpu.free_pinned(back);
    }
    assert_eq!(gpu.live_handles(), 0);
}

#[test]
fn a_capture_dropped_part_way_leaves_the_stream_running_and_nothing_alive() {
    use crate::cuda::owned::{Capture, GpuMemory, MemoryKind, OwnedStream};
    let sim = SimGpu::new(0);
    let gpu: Arc<dyn Gpu> = sim.clone();
    {
        let stream = OwnedStream::new(&gpu, 0).unwrap();
        let host = GpuMemory::new(&gpu, MemoryKind::Pinned, 16).unwrap();
        let dev = GpuMemory::new(&gpu, MemoryKind::Device, 16).unwrap();
        // SAFETY: the stream is this device's, captured by this thread alone; the blocks hold
        // 16 bytes and outlive the stream's work (synchronized below).
        unsafe {
            let capture = Capture::begin(&gpu, stream.raw()).unwrap();
            gpu.copy_to_device(dev.ptr(), host.ptr(), 16, stream.raw())
                .unwrap();
            drop(capture);
            assert_eq!(sim.stats().graphs, 1, "made by the drop, then destroyed");
            gpu.copy_to_device(dev.ptr(), host.ptr(), 16, stream.raw())
                .unwrap();
            gpu.synchronize(stream.raw()).unwrap();
        }
        assert_eq!(
            sim.stats().uploads,
            1,
            "the stream runs again; the capture never ran"
        );
        // SAFETY: as above; nothing is enqueued.
        let capture = unsafe { Capture::begin(&gpu, stream.raw()) }.unwrap();
        let graph = capture.end().unwrap();
        assert_eq!(sim.live_handles(), 4, "a stream, two blocks and a graph");
        drop(graph);
    }
    assert_eq!(sim.live_handles(), 0, "every handle is released on drop");
}
