use super::*;

const MS: Duration = Duration::from_millis(1);

fn rule() -> Rule {
    Rule {
        budget: 10 * MS,
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
    // Within one window of the pressure (4 frames of 10 ms) after it began at 1 s.
    assert!(first.at_s <= 1.04 + 1e-9, "{first:?}");
    assert_eq!(first.evidence.frames, 4);
    assert_eq!(first.evidence.over_budget, 4);
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
    // Each probe costs a window (0.04 s) on placement 0 before the rule moves on again; the
    // hold then grows 1, 2, 4, 4 s, and each hold is a whole number of windows.
    assert!(gaps.len() >= 4, "{probes:?}");
    for (gap, hold) in gaps.iter().zip([2.0, 4.0, 4.0, 4.0]) {
        assert!((gap - (hold + 0.04)).abs() < 0.011, "gaps {gaps:?}");
    }
    assert_eq!(s.switcher.hold(), Duration::from_secs(4));
    // Switches alternate and never come faster than a window apart.
    for pair in s.switches.windows(2) {
        assert_eq!(pair[0].to, pair[1].from);
        assert!(pair[1].at_s - pair[0].at_s >= 0.04 - 1e-9);
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
    assert_eq!(switches[0].evidence.over_budget, 0);
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
    assert!((1..=3).all(|i| sw.observe(late(i, 0)).is_none()));
    assert!(sw.observe(late(4, 0)).is_some());
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
        let e = r.check().unwrap_err();
        assert!(e.contains(word), "{e}");
    }
    assert!(Rule::for_budget(10 * MS).check().is_ok());
}
