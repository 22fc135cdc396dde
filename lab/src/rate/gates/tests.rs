use super::*;

const MS: Duration = Duration::from_millis(1);

/// A clean trial at 100 CPI/s over a 10 s window: everything within the default gates.
fn clean() -> TrialMeasurement {
    TrialMeasurement {
        offered_rate: 100.0,
        frames_sent: 1000,
        frames_completed: 1000,
        partial_frames: 0,
        dropped_frames: 0,
        frames_failed_verification: 0,
        processed_rate: 100.0,
        post_frame_p99: 4 * MS,
        post_frame_trend: 0.0,
        window: Duration::from_secs(10),
        frames_over_budget: 0,
        frames_timed: 1000,
    }
}

/// The default gates at a CPI of 6.4 ms (1024x128): the deadline is 6.4 ms or 1/R.
fn defaults() -> Gates {
    Gates::new(BudgetRule::default().at_period(Duration::from_micros(6_400)))
}

/// The strict rule's gates, 1/R.
fn strict() -> Gates {
    Gates::new(LatencyBudget::OneFramePeriod)
}

fn failures(m: &TrialMeasurement) -> Vec<Failure> {
    judge(m, &strict()).failures
}

#[test]
fn a_clean_measurement_passes() {
    let verdict = judge(&clean(), &strict());
    assert!(verdict.passed && verdict.is_pass(), "{verdict}");
    assert!(verdict.failures.is_empty());
    assert_eq!(verdict.to_string(), "pass");
}

#[test]
fn defaults_are_the_contract() {
    let gates = defaults();
    assert_eq!(
        gates.latency_budget,
        LatencyBudget::Deadline {
            frame_period: Duration::from_micros(6_400)
        }
    );
    assert_eq!(gates.min_rate_ratio, 0.99);
    assert_eq!(gates.max_trend_growth, 0.5);
    assert_eq!(BudgetRule::default(), BudgetRule::Deadline);
}

#[test]
fn the_deadline_is_the_cpi_duration_or_the_period_when_longer() {
    let deadline = defaults().latency_budget;
    // Fast streams: the CPI's physical duration, whatever R.
    assert_eq!(deadline.at(500.0), Duration::from_micros(6_400));
    assert_eq!(deadline.at(156.25), Duration::from_micros(6_400));
    // A slow stream is held to its own period, never to less.
    assert_eq!(deadline.at(100.0), 10 * MS);
    assert_eq!(deadline.at(1.0), Duration::from_secs(1));
    assert_eq!(deadline.at(0.0), Duration::MAX);

    // 5 ms passes at 500 CPI/s under the deadline but fails the strict 1/R (2 ms).
    let fast = TrialMeasurement {
        offered_rate: 500.0,
        frames_sent: 5000,
        frames_completed: 5000,
        processed_rate: 500.0,
        post_frame_p99: 5 * MS,
        ..clean()
    };
    assert!(judge(&fast, &defaults()).is_pass());
    assert_eq!(
        failures(&fast),
        [Failure::LatencyOverBudget {
            p99: 5 * MS,
            budget: 2 * MS
        }]
    );
}

#[test]
fn budget_rules_parse_and_print_as_given() {
    for (text, rule) in [
        ("deadline", BudgetRule::Deadline),
        ("1/R", BudgetRule::OneFramePeriod),
        ("1/r", BudgetRule::OneFramePeriod),
        ("6.4ms", BudgetRule::Fixed(Duration::from_micros(6_400))),
        ("25 ms", BudgetRule::Fixed(25 * MS)),
        ("500us", BudgetRule::Fixed(Duration::from_micros(500))),
        ("0.1s", BudgetRule::Fixed(100 * MS)),
    ] {
        assert_eq!(text.parse::<BudgetRule>(), Ok(rule), "{text}");
        assert_eq!(rule.to_string().parse::<BudgetRule>(), Ok(rule), "{rule}");
    }
    for bad in ["", "6.4", "ms", "0ms", "-1ms", "fast", "1/2", "6.4 min"] {
        let e = bad.parse::<BudgetRule>().unwrap_err().to_string();
        assert!(e.contains("deadline") && e.contains("1/R"), "{bad}: {e}");
    }
}

#[test]
fn budgets_serialize_with_their_rule() {
    let deadline = defaults().latency_budget;
    let text = serde_json::to_string(&deadline).unwrap();
    assert_eq!(text, r#"{"rule":"deadline","frame_period_ms":6.4}"#);
    assert_eq!(
        serde_json::from_str::<LatencyBudget>(&text).unwrap(),
        deadline
    );
    assert_eq!(
        serde_json::to_string(&LatencyBudget::OneFramePeriod).unwrap(),
        r#"{"rule":"one_frame_period"}"#
    );
    assert_eq!(deadline.to_string(), "deadline (max of 6.4 ms and 1/R)");
    assert_eq!(LatencyBudget::Fixed { bound: 2 * MS }.to_string(), "2 ms");
}

#[test]
fn incomplete_frames_fail() {
    let m = TrialMeasurement {
        frames_completed: 990,
        ..clean()
    };
    assert_eq!(
        failures(&m),
        [Failure::NotAllFramesCompleted {
            sent: 1000,
            completed: 990
        }]
    );
}

#[test]
fn more_completed_than_sent_is_an_accounting_failure() {
    let m = TrialMeasurement {
        frames_completed: 1001,
        ..clean()
    };
    let got = failures(&m);
    assert_eq!(
        got,
        [Failure::NotAllFramesCompleted {
            sent: 1000,
            completed: 1001
        }]
    );
    assert!(
        got[0].to_string().contains("accounting error"),
        "{}",
        got[0]
    );
}

#[test]
fn partial_frames_fail() {
    let m = TrialMeasurement {
        partial_frames: 1,
        ..clean()
    };
    assert_eq!(failures(&m), [Failure::PartialFrames(1)]);
}

#[test]
fn dropped_frames_fail() {
    let m = TrialMeasurement {
        dropped_frames: 3,
        ..clean()
    };
    assert_eq!(failures(&m), [Failure::DroppedFrames(3)]);
}

#[test]
fn verification_failures_fail() {
    let m = TrialMeasurement {
        frames_failed_verification: 2,
        ..clean()
    };
    assert_eq!(failures(&m), [Failure::Verification(2)]);
}

#[test]
fn a_short_rate_fails_and_the_ratio_is_inclusive() {
    let wanted = 0.99 * 100.0;
    let at_ratio = TrialMeasurement {
        processed_rate: wanted,
        ..clean()
    };
    assert!(judge(&at_ratio, &strict()).is_pass());

    let short = TrialMeasurement {
        processed_rate: 98.9,
        ..clean()
    };
    assert_eq!(
        failures(&short),
        [Failure::RateShort {
            processed: 98.9,
            wanted
        }]
    );
}

#[test]
fn the_strict_budget_is_one_frame_period_at_r() {
    assert_eq!(LatencyBudget::OneFramePeriod.at(100.0), 10 * MS);
    assert_eq!(LatencyBudget::OneFramePeriod.at(50.0), 20 * MS);
    assert_eq!(LatencyBudget::Fixed { bound: 3 * MS }.at(100.0), 3 * MS);

    // 10.5 ms fails at 100 CPI/s (period 10 ms) and passes at 50 CPI/s (period 20 ms).
    let p99 = Duration::from_micros(10_500);
    let at_100 = TrialMeasurement {
        post_frame_p99: p99,
        ..clean()
    };
    assert_eq!(
        failures(&at_100),
        [Failure::LatencyOverBudget {
            p99,
            budget: 10 * MS
        }]
    );
    let at_50 = TrialMeasurement {
        offered_rate: 50.0,
        frames_sent: 500,
        frames_completed: 500,
        processed_rate: 50.0,
        post_frame_p99: p99,
        ..clean()
    };
    assert!(judge(&at_50, &strict()).is_pass());

    // Exactly the budget passes.
    let at_bound = TrialMeasurement {
        post_frame_p99: 10 * MS,
        ..clean()
    };
    assert!(judge(&at_bound, &strict()).is_pass());
}

#[test]
fn a_fixed_latency_budget_applies_at_every_rate() {
    let gates = Gates::new(LatencyBudget::Fixed { bound: 2 * MS });
    let verdict = judge(&clean(), &gates);
    assert_eq!(
        verdict.failures,
        [Failure::LatencyOverBudget {
            p99: 4 * MS,
            budget: 2 * MS
        }]
    );
}

#[test]
fn the_budget_of_a_rate_without_a_period_is_unbounded() {
    assert_eq!(LatencyBudget::OneFramePeriod.at(0.0), Duration::MAX);
    assert_eq!(LatencyBudget::OneFramePeriod.at(-1.0), Duration::MAX);
    assert_eq!(LatencyBudget::OneFramePeriod.at(f64::NAN), Duration::MAX);
}

#[test]
fn rising_latency_fails_beyond_half_the_budget_over_the_window() {
    // Budget 10 ms at 100 CPI/s, so growth over the 10 s window may be at most 5 ms.
    let rising = |trend: f64| TrialMeasurement {
        post_frame_trend: trend,
        ..clean()
    };
    assert!(judge(&rising(4e-4), &strict()).is_pass()); // 4 ms
    assert!(judge(&rising(-1e-3), &strict()).is_pass()); // falling
    let got = failures(&rising(6e-4)); // 6 ms
    let [Failure::RisingLatency { growth, allowed }] = got[..] else {
        panic!("expected one RisingLatency, got {got:?}");
    };
    assert!((growth - 6e-3).abs() < 1e-12, "{growth}");
    assert!((allowed - 5e-3).abs() < 1e-12, "{allowed}");
}

#[test]
fn nan_fails_closed() {
    let nan_rate = TrialMeasurement {
        processed_rate: f64::NAN,
        ..clean()
    };
    assert!(matches!(
        failures(&nan_rate)[..],
        [Failure::RateShort { .. }]
    ));
    let nan_trend = TrialMeasurement {
        post_frame_trend: f64::NAN,
        ..clean()
    };
    assert!(matches!(
        failures(&nan_trend)[..],
        [Failure::RisingLatency { .. }]
    ));
    let nan_gates = Gates {
        min_rate_ratio: f64::NAN,
        max_trend_growth: f64::NAN,
        ..strict()
    };
    let verdict = judge(&clean(), &nan_gates);
    assert!(!verdict.is_pass());
    assert_eq!(verdict.failures.len(), 2, "{verdict}");
}

#[test]
fn every_failure_is_reported_in_gate_order() {
    let m = TrialMeasurement {
        offered_rate: 100.0,
        frames_sent: 1000,
        frames_completed: 900,
        partial_frames: 5,
        dropped_frames: 95,
        frames_failed_verification: 1,
        processed_rate: 90.0,
        post_frame_p99: 50 * MS,
        post_frame_trend: 1e-2,
        window: Duration::from_secs(10),
        frames_over_budget: 0,
        frames_timed: 900,
    };
    let verdict = judge(&m, &strict());
    assert!(!verdict.passed && !verdict.is_pass());
    let kinds: Vec<_> = verdict
        .failures
        .iter()
        .map(|f| match f {
            Failure::NotAllFramesCompleted { .. } => "completed",
            Failure::PartialFrames(_) => "partial",
            Failure::DroppedFrames(_) => "dropped",
            Failure::Verification(_) => "verification",
            Failure::RateShort { .. } => "rate",
            Failure::LatencyOverBudget { .. } => "latency",
            Failure::RisingLatency { .. } => "trend",
            Failure::SystemFailed(_) => "system",
            Failure::SenderLimit { .. } => "sender",
            Failure::Pipeline(..) => "pipeline",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "completed",
            "partial",
            "dropped",
            "verification",
            "rate",
            "latency",
            "trend"
        ]
    );
    let text = verdict.to_string();
    assert!(
        text.starts_with("fail: only 900 of 1000 frames sent"),
        "{text}"
    );
    assert_eq!(text.matches("; ").count(), 6, "{text}");
}

#[test]
fn failures_read_as_one_short_sentence() {
    let all = [
        Failure::NotAllFramesCompleted {
            sent: 10,
            completed: 9,
        },
        Failure::NotAllFramesCompleted {
            sent: 9,
            completed: 10,
        },
        Failure::PartialFrames(1),
        Failure::DroppedFrames(2),
        Failure::Verification(3),
        Failure::RateShort {
            processed: 9.0,
            wanted: 9.9,
        },
        Failure::LatencyOverBudget {
            p99: 12 * MS,
            budget: 10 * MS,
        },
        Failure::RisingLatency {
            growth: 6e-3,
            allowed: 5e-3,
        },
        Failure::SystemFailed("receiver exited with status 1".into()),
    ];
    for failure in &all {
        let text = failure.to_string();
        assert!(!text.is_empty() && text.len() < 100, "{text}");
        assert!(!text.contains('\n') && !text.ends_with('.'), "{text}");
    }
    assert_eq!(
        Failure::PartialFrames(1).to_string(),
        "1 frame completed partial"
    );
    assert_eq!(Failure::DroppedFrames(2).to_string(), "2 frames dropped");
    assert_eq!(
        Failure::LatencyOverBudget {
            p99: 12 * MS,
            budget: 10 * MS
        }
        .to_string(),
        "post-frame p99 12.000ms exceeds the 10.000ms budget"
    );
}

#[test]
fn verdict_consistency() {
    assert!(Verdict::pass().is_pass());
    assert!(Verdict::from_failures(Vec::new()).is_pass());
    assert!(!Verdict::from_failures(vec![Failure::DroppedFrames(1)]).is_pass());
    // Hand-built and inconsistent: counts as a failure.
    let odd = Verdict {
        passed: true,
        failures: vec![Failure::DroppedFrames(1)],
    };
    assert!(!odd.is_pass());
    assert!(!Verdict::default().is_pass());
}

#[test]
fn the_loss_ratio_counts_every_frame_lost_and_condemns_a_failed_trial() {
    let gates = strict();
    let m = clean();
    assert_eq!(loss_ratio(&m, &judge(&m, &gates)), 0.0);
    let lossy = TrialMeasurement {
        frames_completed: 995,
        partial_frames: 1,
        dropped_frames: 2,
        frames_failed_verification: 1,
        frames_over_budget: 3,
        ..clean()
    };
    // 5 never completed (1 partial and 2 dropped among them), 1 rejected, 3 late: 9 of 1000.
    assert_eq!(loss_ratio(&lossy, &judge(&lossy, &gates)), 0.009);
    // The issue's case: a lost frame counted twice. 18 frames dropped and nothing else lost is
    // 18 frames, not 36.
    let dropped = TrialMeasurement {
        frames_completed: 982,
        dropped_frames: 18,
        ..clean()
    };
    assert_eq!(loss_ratio(&dropped, &judge(&dropped, &gates)), 0.018);
    let falling_behind = TrialMeasurement {
        post_frame_trend: 1.0,
        ..clean()
    };
    assert_eq!(
        loss_ratio(&falling_behind, &judge(&falling_behind, &gates)),
        1.0
    );
    let crashed = Verdict::from_failures(vec![Failure::Pipeline(
        1,
        Box::new(Failure::SystemFailed("exited".into())),
    )]);
    assert_eq!(loss_ratio(&clean(), &crashed), 1.0);
    let nothing = TrialMeasurement {
        frames_sent: 0,
        frames_completed: 0,
        ..clean()
    };
    assert_eq!(loss_ratio(&nothing, &Verdict::pass()), 1.0);
    let miscounted = TrialMeasurement {
        frames_completed: 1001,
        ..clean()
    };
    assert_eq!(loss_ratio(&miscounted, &judge(&miscounted, &gates)), 1.0);
}

/// Frames late are a share of the frames timed (the measured window's), not of every frame
/// sent (the warm-up's too): a trial of the committed default results (1197 CPI/s, 0.5 s of
/// warm-up and 2 s measured: 2994 sent, 2395 timed) had 25 frames over the 6.4 ms budget and
/// a p99 of 6.443 ms. That is 1.04% of its frames late, high-loss for the robust goal's 1%,
/// not the 0.84% (and a filled marker above the budget line) that 25 of 2994 made it.
#[test]
fn frames_late_are_a_share_of_the_frames_timed() {
    let m = TrialMeasurement {
        offered_rate: 1197.004,
        frames_sent: 2994,
        frames_completed: 2994,
        processed_rate: 1196.127,
        post_frame_p99: Duration::from_micros(6_443),
        window: Duration::from_secs(2),
        frames_over_budget: 25,
        frames_timed: 2395,
        ..clean()
    };
    let verdict = judge(&m, &defaults());
    let loss = loss_ratio(&m, &verdict);
    assert!((loss - 25.0 / 2395.0).abs() < 1e-12, "{loss}");
    assert!(loss > 0.01);
    // Results written before the count was kept take the late frames over those sent.
    let before = TrialMeasurement {
        frames_timed: 0,
        ..m.clone()
    };
    let loss = loss_ratio(&before, &judge(&before, &defaults()));
    assert!((loss - 25.0 / 2994.0).abs() < 1e-12, "{loss}");
    // A lost frame and a late one: each counted once, over the frames sent.
    let both = TrialMeasurement {
        frames_completed: 2993,
        dropped_frames: 1,
        ..m
    };
    let loss = loss_ratio(&both, &judge(&both, &defaults()));
    assert!(
        (loss - (1.0 + 25.0 * 2994.0 / 2395.0) / 2994.0).abs() < 1e-12,
        "{loss}"
    );
}
