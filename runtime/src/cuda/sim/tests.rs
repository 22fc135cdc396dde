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
