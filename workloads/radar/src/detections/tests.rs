use super::*;

fn cpi() -> Cpi {
    "1024x128".parse().unwrap()
}

fn cl(range_bin: u32, doppler_bin: u32, power: f32) -> Cluster {
    Cluster {
        range_bin,
        doppler_bin,
        power,
    }
}

fn read(text: &str) -> Result<(Cpi, Vec<FrameDetections>), FormatError> {
    read_detections(text.as_bytes(), "test.det")
}

/// The error's line and kind, checking the message names the source and line.
fn fails(text: &str) -> (usize, FormatErrorKind) {
    let err = read(text).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("test.det:{}: ", err.line)),
        "{msg}"
    );
    (err.line, err.kind)
}

#[test]
fn round_trip() {
    let frames = vec![
        FrameDetections {
            frame_id: 0,
            clusters: vec![
                cl(61, 7, 1234567.5),
                cl(154, 118, 0.1),
                cl(1023, 127, 3.4e38),
            ],
        },
        FrameDetections {
            frame_id: 5,
            clusters: vec![],
        },
        FrameDetections {
            frame_id: 2,
            clusters: vec![cl(0, 0, 0.0), cl(7, 9, f32::MIN_POSITIVE)],
        },
    ];
    let mut w = DetectionWriter::new(Vec::new(), cpi()).unwrap();
    for f in &frames {
        w.write_frame(f.frame_id, &f.clusters).unwrap();
    }
    let bytes = w.finish().unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // Every line the writer writes ends in '\n', the last one included.
    assert!(text.ends_with('\n'), "{text:?}");
    assert_eq!(text.lines().count(), text.matches('\n').count());
    assert!(text.starts_with("kplace-detections v1 cpi=1024x128\nframe 0 3\n61 7 1234567.5\n"));
    assert!(text.contains("frame 5 0\nframe 2 2\n"));

    let (c, back) = read_detections(bytes.as_slice(), "mem").unwrap();
    assert_eq!(c, cpi());
    assert_eq!(back, frames);

    // Identical values give identical bytes.
    let mut again = DetectionWriter::new(Vec::new(), cpi()).unwrap();
    for f in &back {
        again.write_frame(f.frame_id, &f.clusters).unwrap();
    }
    assert_eq!(again.finish().unwrap(), bytes);
}

#[test]
fn comments_blank_lines_and_crlf_are_ignored() {
    let text = "# produced by a peer\n\nkplace-detections v1 cpi=1024x128\r\n\
                    frame 3 2\r\n  # between clusters\n\n61\t7  1e6\r\n62 8 2.5\n# end\n";
    let (_, frames) = read(text).unwrap();
    assert_eq!(
        frames,
        vec![FrameDetections {
            frame_id: 3,
            clusters: vec![cl(61, 7, 1e6), cl(62, 8, 2.5)]
        }]
    );
}

#[test]
fn writer_refuses_invalid_clusters() {
    let mut w = DetectionWriter::new(Vec::new(), cpi()).unwrap();
    for bad in [
        cl(1024, 0, 1.0),
        cl(0, 128, 1.0),
        cl(0, 0, f32::NAN),
        cl(0, 0, -1.0),
    ] {
        let err = w.write_frame(1, &[cl(1, 1, 1.0), bad]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
    // Nothing of the refused frames was written.
    let text = String::from_utf8(w.finish().unwrap()).unwrap();
    assert_eq!(text, "kplace-detections v1 cpi=1024x128\n");
}

#[test]
fn header_errors() {
    assert!(matches!(fails(""), (1, FormatErrorKind::MissingHeader)));
    assert!(matches!(
        fails("# only\n\n"),
        (2, FormatErrorKind::MissingHeader)
    ));
    assert!(matches!(
        fails("# c\nframe 0 0\n"),
        (2, FormatErrorKind::BadHeader { .. })
    ));
    assert!(matches!(
        fails("kplace-detections v2 cpi=1024x128\n"),
        (1, FormatErrorKind::UnsupportedVersion { .. })
    ));
    assert!(matches!(
        fails("kplace-detections v1 cpi=1024\n"),
        (
            1,
            FormatErrorKind::BadCpi(CpiParseError::MissingSeparator { .. })
        )
    ));
    assert!(matches!(
        fails("kplace-detections v1 1024x128\n"),
        (1, FormatErrorKind::BadHeader { .. })
    ));
    assert!(matches!(
        fails("kplace-detections v1 cpi=1024x128 extra\n"),
        (1, FormatErrorKind::BadHeader { .. })
    ));
}

const H: &str = "kplace-detections v1 cpi=1024x128\n";

#[test]
fn body_errors_name_the_line() {
    // (input, line of the error, check of its kind)
    type Case = (String, usize, fn(&FormatErrorKind) -> bool);
    let cases: Vec<Case> = vec![
        (
            format!("{H}frame 0 1\n1 2 3\nframes 1 0\n"),
            4,
            |k| matches!(k, FormatErrorKind::UnknownKeyword { keyword } if keyword == "frames"),
        ),
        (format!("{H}frame 0\n"), 2, |k| {
            matches!(
                k,
                FormatErrorKind::FieldCount {
                    what: "frame line",
                    expected: 3,
                    found: 2
                }
            )
        }),
        (format!("{H}frame 0 1\n1 2 3 4\n"), 3, |k| {
            matches!(
                k,
                FormatErrorKind::FieldCount {
                    what: "cluster line",
                    found: 4,
                    ..
                }
            )
        }),
        (format!("{H}frame 0 1\n1 2\n"), 3, |k| {
            matches!(k, FormatErrorKind::FieldCount { found: 2, .. })
        }),
        (format!("{H}frame x 1\n"), 2, |k| {
            matches!(
                k,
                FormatErrorKind::BadNumber {
                    field: "frame id",
                    ..
                }
            )
        }),
        (format!("{H}frame 0 -1\n"), 2, |k| {
            matches!(
                k,
                FormatErrorKind::BadNumber {
                    field: "cluster count",
                    ..
                }
            )
        }),
        (format!("{H}\nframe 0 2\n1 2 3\n-1 2 3\n"), 5, |k| {
            matches!(
                k,
                FormatErrorKind::BadNumber {
                    field: "range bin",
                    ..
                }
            )
        }),
        (format!("{H}frame 0 1\n1 2.5 3\n"), 3, |k| {
            matches!(
                k,
                FormatErrorKind::BadNumber {
                    field: "doppler bin",
                    ..
                }
            )
        }),
        (format!("{H}frame 0 1\n1 2 loud\n"), 3, |k| {
            matches!(k, FormatErrorKind::BadNumber { field: "power", .. })
        }),
        (format!("{H}frame 0 1\n1 2 inf\n"), 3, |k| {
            matches!(k, FormatErrorKind::BadPower { .. })
        }),
        (format!("{H}frame 0 1\n1 2 -4\n"), 3, |k| {
            matches!(k, FormatErrorKind::BadPower { .. })
        }),
        (format!("{H}frame 0 1\n1024 2 3\n"), 3, |k| {
            matches!(
                k,
                FormatErrorKind::BinOutOfRange {
                    axis: "range",
                    bin: 1024,
                    ..
                }
            )
        }),
        (format!("{H}frame 0 1\n1023 128 3\n"), 3, |k| {
            matches!(
                k,
                FormatErrorKind::BinOutOfRange {
                    axis: "doppler",
                    ..
                }
            )
        }),
        (format!("{H}frame 0 131073\n"), 2, |k| {
            matches!(k, FormatErrorKind::TooManyClusters { .. })
        }),
        (format!("{H}1 2 3\n"), 2, |k| {
            matches!(k, FormatErrorKind::UnexpectedCluster { .. })
        }),
        (
            format!("{H}frame 0 1\n1 2 3\n4 5 6\n"),
            4,
            |k| matches!(k, FormatErrorKind::UnexpectedCluster { context } if context.contains("frame 0")),
        ),
        // A short frame is reported at its own frame line, whether the next frame or the
        // end of the input cuts it short.
        (
            format!("{H}frame 0 0\nframe 1 3\n1 2 3\n# gap\nframe 2 0\n"),
            3,
            |k| {
                matches!(
                    k,
                    FormatErrorKind::TruncatedFrame {
                        frame_id: 1,
                        declared: 3,
                        found: 1
                    }
                )
            },
        ),
        (format!("{H}frame 9 2\n1 2 3\n"), 2, |k| {
            matches!(
                k,
                FormatErrorKind::TruncatedFrame {
                    frame_id: 9,
                    found: 1,
                    ..
                }
            )
        }),
        (
            format!("{H}frame 4 0\nframe 5 0\nframe 4 1\n1 1 1\n"),
            4,
            |k| {
                matches!(
                    k,
                    FormatErrorKind::DuplicateFrame {
                        frame_id: 4,
                        first_line: Some(2)
                    }
                )
            },
        ),
    ];
    for (text, line, check) in cases {
        let (got_line, kind) = fails(&text);
        assert_eq!(got_line, line, "{text:?}: {kind}");
        assert!(check(&kind), "{text:?}: unexpected {kind:?}");
    }
}

#[test]
fn a_last_line_without_newline_is_truncated_never_a_record() {
    // A writer killed mid-line: "61 7 1234567.5" cut to "61 7 12" still parses as a
    // cluster, so the missing '\n' is what gives it away.
    for (text, line) in [
        (format!("{H}frame 0 1\n61 7 12"), 3),
        (format!("{H}frame 0 0\nframe 1 0"), 3),
        (format!("{H}frame 0 0\n# a comment"), 3),
        (format!("{H}frame 0 0\n  "), 3),
        ("kplace-detections v1 cpi=1024x128".to_string(), 1),
    ] {
        let (got, kind) = fails(&text);
        assert_eq!(got, line, "{text:?}");
        assert!(
            matches!(kind, FormatErrorKind::NoFinalNewline),
            "{text:?}: {kind:?}"
        );
        assert!(kind.to_string().contains("truncated"), "{kind}");
    }
    // With the newline it is a frame.
    let (_, frames) = read(&format!("{H}frame 0 1\n61 7 12\n")).unwrap();
    assert_eq!(frames[0].clusters, vec![cl(61, 7, 12.0)]);
}

#[test]
fn lines_are_bounded() {
    // The longest line accepted: a comment of MAX_LINE_BYTES bytes, then '\n'.
    let comment = format!("#{}\n", "x".repeat(MAX_LINE_BYTES - 1));
    let (_, frames) = read(&format!("{H}{comment}frame 0 0\n")).unwrap();
    assert_eq!(frames.len(), 1);
    // One byte more is an error at that line, whatever the line holds.
    for long in [
        format!("#{}\n", "x".repeat(MAX_LINE_BYTES)),
        format!("{}\n", " ".repeat(MAX_LINE_BYTES + 1)),
        format!("frame 0 0{}\n", " ".repeat(MAX_LINE_BYTES)),
    ] {
        let (line, kind) = fails(&format!("{H}{long}"));
        assert_eq!(line, 2);
        assert!(
            matches!(
                kind,
                FormatErrorKind::LineTooLong {
                    limit: MAX_LINE_BYTES
                }
            ),
            "{kind:?}"
        );
    }
    // An input without newlines (`/dev/zero`) ends at its first line.
    let err = read_detections(io::BufReader::new(io::repeat(0)), "/dev/zero").unwrap_err();
    assert_eq!(err.line, 1);
    assert!(
        err.to_string()
            .starts_with("/dev/zero:1: line is longer than 65536 bytes"),
        "{err}"
    );
}

/// An endless detection file: the header, then `frame <id> 0` with `id(i)` for line i.
struct Endless {
    line: u64,
    id: fn(u64) -> u64,
    pending: Vec<u8>,
}

impl Read for Endless {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            self.pending = if self.line == 0 {
                H.as_bytes().to_vec()
            } else {
                format!("frame {} 0\n", (self.id)(self.line)).into_bytes()
            };
            self.line += 1;
        }
        let n = out.len().min(self.pending.len());
        out[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

fn endless(id: fn(u64) -> u64) -> DetectionReader<io::BufReader<Endless>> {
    let input = Endless {
        line: 0,
        id,
        pending: Vec::new(),
    };
    DetectionReader::new(io::BufReader::new(input), "endless").unwrap()
}

#[test]
fn an_endless_input_in_order_is_read_in_constant_memory() {
    // The case: `verify --frames 4e9` held about 42 bytes per frame read.
    let mut reader = endless(|line| line - 1).with_frame_limit(4_000_000_000);
    let heap = reader.seen.heap_bytes();
    for expected in 0..200_000 {
        assert_eq!(reader.next_frame().unwrap().unwrap().frame_id, expected);
    }
    assert_eq!(reader.seen.heap_bytes(), heap);
    // A frame that never comes (frame 0, lost) costs nothing either, however many follow it:
    // it held an entry per frame after it, and refused the 65,537th.
    let mut gap = endless(|line| line).with_frame_limit(4_000_000_000);
    for expected in 1..=200_000 {
        assert_eq!(gap.next_frame().unwrap().unwrap().frame_id, expected);
    }
    assert_eq!(gap.seen.heap_bytes(), heap);
    assert_eq!(gap.seen.count_below(200_001), 200_000);
    assert_eq!(gap.seen.first_missing(200_001, 8), vec![0]);
}

#[test]
fn a_frame_more_than_a_window_behind_the_newest_is_refused() {
    use crate::seen::WINDOW;
    // Frame 0 after frames 1..WINDOW: within the window, read.
    let mut within = endless(|line| if line == WINDOW { 0 } else { line });
    for _ in 1..WINDOW {
        within.next_frame().unwrap().unwrap();
    }
    assert_eq!(within.next_frame().unwrap().unwrap().frame_id, 0);
    // After frames 1..=WINDOW: too late to tell from a duplicate, refused naming both.
    let mut late = endless(|line| if line == WINDOW + 1 { 0 } else { line });
    for _ in 1..=WINDOW {
        late.next_frame().unwrap().unwrap();
    }
    let err = late.next_frame().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "endless:{}: frame 0 comes after frame {WINDOW}, {WINDOW} or more frames out of order: too late to tell from a duplicate; a receiver's detections come in frame order",
            WINDOW + 2
        )
    );
}

#[test]
fn endless_valid_lines_end_in_an_error() {
    // Fresh ids, each a valid empty frame: the frame limit ends it at the first id out of
    // range, after every frame the limit allows.
    let mut reader = endless(|line| line - 1).with_frame_limit(100);
    for id in 0..100 {
        let frame = reader.next_frame().unwrap().unwrap();
        assert_eq!((frame.frame_id, frame.clusters.len()), (id, 0));
    }
    let err = reader.next_frame().unwrap_err();
    assert_eq!(err.line, 102);
    assert!(
        matches!(
            err.kind,
            FormatErrorKind::FrameOutOfRange {
                frame_id: 100,
                limit: 100
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "endless:102: frame 100 is outside the frames expected, 0..100"
    );
    // The same id again and again: a duplicate at the second.
    let mut same = endless(|_| 7);
    assert_eq!(same.next_frame().unwrap().unwrap().frame_id, 7);
    let err = same.next_frame().unwrap_err();
    assert_eq!(err.line, 3);
    assert!(
        matches!(err.kind, FormatErrorKind::DuplicateFrame { .. }),
        "{err}"
    );
}

#[test]
fn the_reader_returns_frames_one_at_a_time() {
    let text = format!("{H}frame 2 1\n1 2 3\n# c\nframe 0 0\nframe 1 2\n4 5 6\n");
    let mut reader = DetectionReader::new(text.as_bytes(), "s").unwrap();
    assert_eq!(reader.cpi(), cpi());
    let first = reader.next_frame().unwrap().unwrap();
    assert_eq!((first.frame_id, first.clusters), (2, vec![cl(1, 2, 3.0)]));
    let second = reader.next_frame().unwrap().unwrap();
    assert_eq!((second.frame_id, second.clusters.len()), (0, 0));
    // The third is cut short by the end of the input: an error at its frame line.
    let err = reader.next_frame().unwrap_err();
    assert_eq!(err.line, 6);
    assert!(matches!(
        err.kind,
        FormatErrorKind::TruncatedFrame { found: 1, .. }
    ));
    // Without a limit ids are not bounded; with one, an id at the limit is refused.
    let text = format!("{H}frame 5 0\n");
    let mut reader = DetectionReader::new(text.as_bytes(), "s").unwrap();
    assert_eq!(reader.next_frame().unwrap().unwrap().frame_id, 5);
    assert!(reader.next_frame().unwrap().is_none());
    let mut limited = DetectionReader::new(text.as_bytes(), "s")
        .unwrap()
        .with_frame_limit(5);
    let err = limited.next_frame().unwrap_err();
    assert_eq!(err.line, 2);
    assert!(matches!(err.kind, FormatErrorKind::FrameOutOfRange { .. }));
}

#[test]
fn invalid_utf8_is_reported() {
    let mut bytes = H.as_bytes().to_vec();
    bytes.extend_from_slice(b"frame 0 0\n\xff\xfe\n");
    let err = read_detections(bytes.as_slice(), "bin").unwrap_err();
    assert_eq!(err.line, 3);
    assert!(matches!(err.kind, FormatErrorKind::NotUtf8));
}

#[test]
fn cluster_from_reference_detection() {
    let d = Detection64 {
        range_bin: 3,
        doppler_bin: 4,
        power: 1.0 / 3.0,
    };
    assert_eq!(Cluster::from(d), cl(3, 4, 1.0f32 / 3.0));
}
