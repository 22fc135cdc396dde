use super::*;

const MS: Duration = Duration::from_millis(1);

fn rule() -> Rule {
    Rule {
        budget: 10 * MS,
        trigger: 0.5,
        window: 4,
        over_share: 0.25,
        occupancy: 0.75,
        hold: Duration::from_secs(1),
        max_hold: Duration::from_secs(4),
    }
}

/// A stream of frames every 10 ms on whatever placement is active, each taking `latency(t)`
/// on placement `p`, with `in_flight` of 4 slots in use; returns the switches.
struct Stream {
    switcher: Switcher,
    at: Duration,
    switches: Vec<Switch>,
}

impl Stream {
    fn new(placements: usize) -> Stream {
        Stream {
            switcher: Switcher::new(rule(), placements),
            at: Duration::ZERO,
            switches: Vec::new(),
        }
    }

    /// Delivers frames for `span` of stream time, each with the latency `latency(placement)`.
    fn run(&mut self, span: Duration, latency: impl Fn(usize) -> Duration) {
        let end = self.at + span;
        while self.at < end {
            self.at += 10 * MS;
            let placement = self.switcher.active();
            let observed = Observation {
                at: self.at,
                placement,
                post_frame: latency(placement),
                in_flight: 1,
                slots: 4,
                slot_misses: 0,
            };
            self.switches.extend(self.switcher.observe(observed));
        }
    }
}

#[test]
fn a_placement_that_keeps_up_never_switches() {
    let mut s = Stream::new(2);
    s.run(Duration::from_secs(30), |_| 2 * MS);
    assert!(s.switches.is_empty());
    assert_eq!(s.switcher.active(), 0);
}

#[test]
fn pressure_moves_on_after_one_window_and_relief_comes_back_after_the_hold() {
    let mut s = Stream::new(2);
    // A co-tenant makes placement 0 late for 5 s; placement 1 keeps up throughout.
    s.run(Duration::from_secs(1), |_| 2 * MS);
    s.run(Duration::from_secs(5), |p| {
        if p == 0 { 30 * MS } else { 3 * MS }
    });
    let first = s.switches[0];
    assert_eq!(
        (first.from, first.to, first.reason),
        (0, 1, Reason::Pressure)
    );
    // As soon as the window holds more late frames than a quarter of 4: the second.
    assert!((first.at_s - 1.02).abs() < 1e-9, "{first:?}");
    assert_eq!(first.evidence.frames, 2);
    assert_eq!(first.evidence.late, 2);
    assert!((first.evidence.worst_ms - 30.0).abs() < 1e-9);
    s.run(Duration::from_secs(20), |_| 2 * MS);
    let last = *s.switches.last().unwrap();
    assert_eq!((last.from, last.to, last.reason), (1, 0, Reason::Relief));
    assert_eq!(s.switcher.active(), 0, "{:#?}", s.switches);
}

#[test]
fn failed_probes_double_the_hold_up_to_the_longest_and_a_lasting_one_resets_it() {
    let mut s = Stream::new(2);
    // Placement 0 is late for 40 s: every probe fails.
    s.run(Duration::from_secs(40), |p| {
        if p == 0 { 30 * MS } else { 3 * MS }
    });
    let probes: Vec<f64> = s
        .switches
        .iter()
        .filter(|w| w.reason == Reason::Relief)
        .map(|w| w.at_s)
        .collect();
    let gaps: Vec<f64> = probes.windows(2).map(|p| p[1] - p[0]).collect();
    // Each probe costs one late frame (10 ms) on placement 0, which ends it; the hold then
    // grows 1, 2, 4, 4 s, and each hold is a whole number of windows.
    assert!(gaps.len() >= 4, "{probes:?}");
    for (gap, hold) in gaps.iter().zip([2.0, 4.0, 4.0, 4.0]) {
        assert!((gap - (hold + 0.01)).abs() < 1e-6, "gaps {gaps:?}");
    }
    assert_eq!(s.switcher.hold(), Duration::from_secs(4));
    let failed: Vec<&Switch> = s.switches.iter().filter(|w| w.from == 0).skip(1).collect();
    assert!(
        failed
            .iter()
            .all(|w| w.evidence.frames == 1 && w.evidence.late == 1)
    );
    // Switches alternate.
    for pair in s.switches.windows(2) {
        assert_eq!(pair[0].to, pair[1].from);
    }
    // The pressure goes: the next probe lasts, and the hold is back to its first value.
    s.run(Duration::from_secs(10), |_| 2 * MS);
    assert_eq!(s.switcher.active(), 0);
    assert_eq!(s.switcher.hold(), Duration::from_secs(1));
}

#[test]
fn full_slots_and_dropped_frames_are_pressure_before_any_frame_is_late() {
    let mut sw = Switcher::new(rule(), 3);
    let frame = |i: u64, in_flight, slot_misses| Observation {
        at: MS * i as u32,
        placement: 0,
        post_frame: MS,
        in_flight,
        slots: 4,
        slot_misses,
    };
    let switches: Vec<_> = (1..=4).filter_map(|i| sw.observe(frame(i, 3, 0))).collect();
    assert_eq!(switches.len(), 1);
    assert_eq!(switches[0].evidence.occupancy, 0.75);
    assert_eq!(switches[0].evidence.late, 0);
    // On placement 1: one frame finds no free slot within the window.
    let f = |i: u64, misses| Observation {
        placement: 1,
        ..frame(i, 1, misses)
    };
    let switches: Vec<_> = (5..=8)
        .filter_map(|i| sw.observe(f(i, if i >= 7 { 1 } else { 0 })))
        .collect();
    assert_eq!(switches.len(), 1, "{switches:?}");
    assert_eq!((switches[0].from, switches[0].to), (1, 2));
    assert_eq!(switches[0].evidence.slot_misses, 1);
    // The last placement under pressure stays: there is nowhere else to go.
    let f = |i: u64| Observation {
        placement: 2,
        post_frame: 50 * MS,
        ..frame(i, 1, 1)
    };
    assert!((9..=40).all(|i| sw.observe(f(i)).is_none()));
    assert_eq!(sw.active(), 2);
}

#[test]
fn frames_of_the_placement_left_behind_are_not_judged() {
    let mut sw = Switcher::new(rule(), 2);
    let late = |i: u32, placement| Observation {
        at: MS * i,
        placement,
        post_frame: 40 * MS,
        in_flight: 1,
        slots: 4,
        slot_misses: 0,
    };
    assert!(sw.observe(late(1, 0)).is_none());
    assert!(sw.observe(late(2, 0)).is_some());
    // Placement 0's frames still in flight arrive late: they change nothing.
    assert!((5..=100).all(|i| sw.observe(late(i, 0)).is_none()));
    assert_eq!(sw.active(), 1);
}

#[test]
fn a_rule_that_could_never_judge_is_refused_naming_what() {
    let bad = [
        (
            Rule {
                budget: Duration::ZERO,
                ..rule()
            },
            "budget",
        ),
        (
            Rule {
                window: 0,
                ..rule()
            },
            "window",
        ),
        (
            Rule {
                over_share: 1.0,
                ..rule()
            },
            "late frames",
        ),
        (
            Rule {
                occupancy: 0.0,
                ..rule()
            },
            "occupancy",
        ),
        (
            Rule {
                max_hold: MS,
                ..rule()
            },
            "hold",
        ),
    ];
    for (r, word) in bad {
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains(word), "{e}");
    }
    assert!(Rule::for_budget(10 * MS).check().is_ok());
}

#[test]
fn a_probes_first_window_tolerates_no_late_frame_and_later_ones_their_share() {
    let mut sw = Switcher::new(rule(), 2);
    let frame = |i: u32, placement, late: bool| Observation {
        at: MS * (10 * i),
        placement,
        post_frame: if late { 20 * MS } else { MS },
        in_flight: 1,
        slots: 4,
        slot_misses: 0,
    };
    // Two late frames move the run on at 20 ms.
    assert!(sw.observe(frame(1, 0, true)).is_none());
    assert_eq!(sw.observe(frame(2, 0, true)).unwrap().to, 1);
    // A second later, a window on time probes placement 0 again.
    let relief = (3..=104)
        .find_map(|i| sw.observe(frame(i, 1, false)))
        .expect("a probe after the hold");
    assert_eq!((relief.to, relief.reason), (0, Reason::Relief));
    // Its first window on time, then one late frame in the next: within a window's share.
    assert!((200..204).all(|i| sw.observe(frame(i, 0, false)).is_none()));
    assert!(sw.observe(frame(204, 0, true)).is_none());
    assert!((205..208).all(|i| sw.observe(frame(i, 0, false)).is_none()));
    assert_eq!(sw.active(), 0);
    // The next probe's first window: one late frame ends it.
    let mut sw2 = sw.clone();
    assert!(
        sw2.observe(frame(300, 0, true)).is_none(),
        "not a probe's first window"
    );
    let mut sw = Switcher::new(rule(), 2);
    sw.observe(frame(1, 0, true));
    sw.observe(frame(2, 0, true));
    (3..=104)
        .find_map(|i| sw.observe(frame(i, 1, false)))
        .unwrap();
    let failed = sw.observe(frame(200, 0, true)).expect("the probe ends");
    assert_eq!(
        (failed.from, failed.to, failed.reason),
        (0, 1, Reason::Pressure)
    );
    assert_eq!((failed.evidence.late, failed.evidence.late_allowed), (1, 0));
    assert_eq!(sw.hold(), Duration::from_secs(2));
}

#[test]
fn a_frame_is_late_past_the_trigger_share_of_the_budget() {
    let mut sw = Switcher::new(rule(), 2);
    // 6 ms is within the 10 ms budget but past its half: late for the rule.
    let frame = |i: u32| Observation {
        at: MS * (10 * i),
        placement: 0,
        post_frame: 6 * MS,
        in_flight: 1,
        slots: 4,
        slot_misses: 0,
    };
    assert!(sw.observe(frame(1)).is_none());
    let s = sw
        .observe(frame(2))
        .expect("two late frames of a window of 4");
    assert_eq!(s.evidence.late, 2);
    let lenient = Rule {
        trigger: 1.0,
        ..rule()
    };
    let mut sw = Switcher::new(lenient, 2);
    assert!((1..=40).all(|i| sw.observe(frame(i)).is_none()));
}
