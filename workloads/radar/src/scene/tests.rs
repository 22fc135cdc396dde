use super::*;

fn cpi(s: &str) -> Cpi {
    s.parse().unwrap()
}

fn frame(scene: &Scene, index: u64) -> Vec<[i16; 2]> {
    let mut out = vec![[0i16; 2]; scene.cpi().cells()];
    scene.generate_frame(index, &mut out).unwrap();
    out
}

#[test]
fn target_parses_and_names_the_bad_field() {
    let t: Target = "30,2.0,6".parse().unwrap();
    assert_eq!(
        t,
        Target {
            range_m: 30.0,
            velocity_mps: 2.0,
            snr_db: 6.0
        }
    );
    let t: Target = " 75 , -3 , 25 ".parse().unwrap();
    assert_eq!(t.velocity_mps, -3.0);

    let err = "30,2.0".parse::<Target>().unwrap_err();
    assert!(matches!(err, TargetParseError::FieldCount { found: 2, .. }));
    let err = "30,2,6,1".parse::<Target>().unwrap_err();
    assert!(matches!(err, TargetParseError::FieldCount { found: 4, .. }));

    for (text, field) in [
        ("x,2,6", "range"),
        ("30,fast,6", "velocity"),
        ("30,2,", "snr"),
        ("30,2,inf", "snr"),
        ("NaN,2,6", "range"),
    ] {
        let err = text.parse::<Target>().unwrap_err();
        match &err {
            TargetParseError::Field { field: f, .. } => assert_eq!(*f, field, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn default_sets() {
    let d = default_targets();
    assert_eq!(d.len(), 3);
    assert_eq!(d[1].range_m, 75.0);
    assert_eq!(d[1].velocity_mps, -3.0);
    assert!(d.iter().all(|t| t.snr_db == 6.0));
    let h = high_snr_targets();
    assert!(h.iter().all(|t| t.snr_db == 25.0));
    assert_eq!(h[2].range_m, 120.0);
}

#[test]
fn truth_bins_follow_the_workload_formulas() {
    let scene = Scene::new(SceneConfig::new(cpi("1024x128"))).unwrap();
    let truth = scene.truth(0);
    assert_eq!(truth.len(), 3);
    let expected_rb = 2.0 * 307.2e6 * 30.0 / 299_792_458.0;
    assert!((truth[0].range_bin - expected_rb).abs() < 1e-12);
    assert!((truth[0].range_bin - 61.48).abs() < 0.01);
    // 2 v fc / c * T * M with T = 50 us, M = 128.
    let db = 2.0 * 2.0 * 77e9 / 299_792_458.0 * 50e-6 * 128.0;
    assert!((truth[0].doppler_bin - db).abs() < 1e-12);
    // A closing target folds to the top of the Doppler axis.
    let db = 2.0 * -3.0 * 77e9 / 299_792_458.0 * 50e-6 * 128.0;
    assert!((truth[1].doppler_bin - (128.0 + db)).abs() < 1e-9);
    assert!(truth.iter().all(|t| (0.0..128.0).contains(&t.doppler_bin)));

    // Ranges advance 5 ms per frame.
    let later = scene.truth(1000);
    let moved = range_bin(30.0 + 2.0 * 1000.0 * 0.005);
    assert!((later[0].range_bin - moved).abs() < 1e-9);
    assert_eq!(later[0].doppler_bin, truth[0].doppler_bin);
}

#[test]
fn truth_range_folds_into_the_cpi() {
    let scene = Scene::new(SceneConfig::new(cpi("1024x128"))).unwrap();
    // The 75 m target closes at 3 m/s: 75 m / (3 m/s) / 5 ms = 5000 frames to zero range.
    let t = scene.truth(6000)[1];
    assert!((0.0..1024.0).contains(&t.range_bin));
    assert!((t.range_bin - (1024.0 + range_bin(75.0 - 3.0 * 30.0))).abs() < 1e-9);
    assert_eq!(fold(-1e-300, 128), 0.0);
}

#[test]
fn frames_are_deterministic_and_order_independent() {
    let scene = Scene::new(SceneConfig::new(cpi("256x32"))).unwrap();
    let f3 = frame(&scene, 3);
    let f7 = frame(&scene, 7);
    assert_eq!(frame(&scene, 3), f3);
    assert_ne!(f3, f7);
    // A second scene with the same config reproduces the bytes; another seed does not.
    let again = Scene::new(SceneConfig::new(cpi("256x32"))).unwrap();
    assert_eq!(frame(&again, 7), f7);
    let other = Scene::new(SceneConfig {
        seed: 2,
        ..SceneConfig::new(cpi("256x32"))
    })
    .unwrap();
    assert_ne!(frame(&other, 7), f7);
}

#[test]
fn noise_has_the_configured_sigma() {
    let scene = Scene::new(SceneConfig {
        targets: Vec::new(),
        ..SceneConfig::new(cpi("1024x128"))
    })
    .unwrap();
    let f = frame(&scene, 0);
    let n = (2 * f.len()) as f64;
    let (sum, sum_sq) = f.iter().flatten().fold((0.0, 0.0), |(s, s2), &v| {
        let v = f64::from(v);
        (s + v, s2 + v * v)
    });
    let mean = sum / n;
    let sigma = (sum_sq / n - mean * mean).sqrt();
    assert!(mean.abs() < 5.0, "mean {mean}");
    assert!((sigma - 512.0).abs() < 3.0, "sigma {sigma}");
}

#[test]
fn noiseless_signal_matches_the_formula() {
    let c = cpi("16x8");
    let target = Target {
        range_m: 5.0,
        velocity_mps: 4.0,
        snr_db: 20.0,
    };
    let scene = Scene::new(SceneConfig {
        targets: vec![target],
        noise_sigma: 100.0,
        seed: 9,
        ..SceneConfig::new(c)
    })
    .unwrap();
    // Subtracting the noise-only frame (same seed, same frame) leaves the signal, up to
    // rounding on each side.
    let noise_only = Scene::new(SceneConfig {
        targets: Vec::new(),
        ..scene.config().clone()
    })
    .unwrap();
    let f = 4;
    let (with, without) = (frame(&scene, f), frame(&noise_only, f));
    let r = 5.0 + 4.0 * f as f64 * 0.005;
    let (rb, db) = (range_bin(r), doppler_bin(4.0, c));
    let a = 1000.0;
    for m in 0..8 {
        for n in 0..16 {
            let phase = TAU * (rb * n as f64 / 16.0 + db * m as f64 / 8.0)
                - 4.0 * PI * CARRIER_HZ * r / SPEED_OF_LIGHT;
            let idx = m * 16 + n;
            let di = f64::from(with[idx][0]) - f64::from(without[idx][0]);
            let dq = f64::from(with[idx][1]) - f64::from(without[idx][1]);
            assert!((di - a * phase.cos()).abs() <= 1.0, "I at {m},{n}");
            assert!((dq - a * phase.sin()).abs() <= 1.0, "Q at {m},{n}");
        }
    }
}

#[test]
fn rejects_invalid_configs() {
    let base = SceneConfig::new(cpi("1024x128"));
    let bad_cpi = SceneConfig {
        cpi: Cpi {
            samples: 0,
            chirps: 128,
        },
        ..base.clone()
    };
    assert!(matches!(
        Scene::new(bad_cpi),
        Err(SceneError::InvalidCpi { .. })
    ));
    let far = SceneConfig {
        targets: vec!["600,0,6".parse().unwrap()],
        ..base.clone()
    };
    let err = Scene::new(far).unwrap_err();
    assert!(matches!(err, SceneError::TargetOutOfRange { index: 0, .. }));
    assert!(err.to_string().contains("outside [0, 1024)"), "{err}");
    let behind = SceneConfig {
        targets: vec!["-1,0,6".parse().unwrap()],
        ..base.clone()
    };
    assert!(Scene::new(behind).is_err());
    let sigma = SceneConfig {
        noise_sigma: -1.0,
        ..base.clone()
    };
    assert!(matches!(
        Scene::new(sigma),
        Err(SceneError::InvalidNoiseSigma { .. })
    ));
    let interval = SceneConfig {
        frame_interval_s: f64::NAN,
        ..base.clone()
    };
    assert!(matches!(
        Scene::new(interval),
        Err(SceneError::InvalidFrameInterval { .. })
    ));
    let loud = SceneConfig {
        targets: vec!["30,0,7000".parse().unwrap()],
        ..base
    };
    assert!(matches!(
        Scene::new(loud),
        Err(SceneError::InvalidTarget { index: 0, .. })
    ));
}

#[test]
fn wrong_buffer_size_is_an_error() {
    let scene = Scene::new(SceneConfig::new(cpi("1024x8"))).unwrap();
    let mut out = vec![[0i16; 2]; 8191];
    assert_eq!(
        scene.generate_frame(0, &mut out),
        Err(SceneError::BufferSize {
            expected: 8192,
            actual: 8191
        })
    );
}

#[test]
fn thirty_db_targets_clip() {
    let scene = Scene::new(SceneConfig {
        targets: targets_at(30.0),
        ..SceneConfig::new(cpi("1024x128"))
    })
    .unwrap();
    let mut out = vec![[0i16; 2]; scene.cpi().cells()];
    let err = scene.generate_frame(0, &mut out).unwrap_err();
    match err {
        SceneError::Clipping { frame, value, .. } => {
            assert_eq!(frame, 0);
            assert!(value.abs() > 32767.0);
        }
        other => panic!("expected clipping, got {other:?}"),
    }
}

#[test]
fn high_snr_targets_do_not_clip() {
    for size in ["1024x128", "2048x256", "4096x512"] {
        let scene = Scene::new(SceneConfig {
            targets: high_snr_targets(),
            ..SceneConfig::new(cpi(size))
        })
        .unwrap();
        let mut out = vec![[0i16; 2]; scene.cpi().cells()];
        for f in [0, 1, 1000] {
            scene.generate_frame(f, &mut out).unwrap();
        }
    }
}
