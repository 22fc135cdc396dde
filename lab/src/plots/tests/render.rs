//! Every plot kind rendered to PNG with resvg, as a viewer shows it: the plots of every
//! committed results file under `docs/results`, of synthetic sweeps (a search without a rate,
//! twelve series), and a run's timeline with and without GPU spans; and every committed plot
//! as it is. Each must render to a picture that is not blank, with every text drawn; no two of
//! its texts may overlap as rendered; and every series of its legend has its own (colour,
//! marker) pair, drawn in the data.
//!
//! Text extents are usvg's, laid out with the system's fonts (DejaVu Sans, which
//! `scripts/setup.sh` installs, where there is one, else the first family found). On a machine
//! without any font usvg drops every text, so the extents are then the layout's own estimate
//! from the SVG (0.6 x the font size per character), and the test says so. `KPLACE_PLOTS_PNG=DIR`
//! keeps the PNGs for a person to look at.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use resvg::{tiny_skia, usvg};

use super::{El, TextBox, answered, hex, histogram, parse, search, stage, sweep, text_box, trial};
use crate::plots::frame::LEGEND_WIDTH;
use crate::plots::style::{PALETTE, Shape};
use crate::plots::timeline::{self, span};
use crate::plots::{Sweep, read_results, write_all};
use crate::rate::sweep::{SweepFile, TrialStatus};
use kplace::report::trace::{SpanKind, Trace, Track};

/// The system's fonts, loaded once, with a sans-serif family that exists.
fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            db.load_system_fonts();
            let family = |name: &str| {
                db.faces()
                    .any(|f| f.families.iter().any(|(n, _)| n == name))
            };
            let sans = if family("DejaVu Sans") {
                Some("DejaVu Sans".to_string())
            } else {
                db.faces()
                    .next()
                    .and_then(|f| f.families.first())
                    .map(|(n, _)| n.clone())
            };
            match sans {
                Some(name) => db.set_sans_serif_family(name),
                None => eprintln!(
                    "no system font: text extents are the layout's estimate (install \
                     fonts-dejavu-core to measure them as rendered)"
                ),
            }
            Arc::new(db)
        })
        .clone()
}

/// A plot as rendered.
struct Picture {
    /// Its file, for messages.
    name: String,
    /// Width and height, pixels.
    size: (f64, f64),
    /// Every non-empty text and its box, as rendered (or estimated without fonts).
    texts: Vec<(String, TextBox)>,
    /// The SVG's elements.
    els: Vec<El>,
}

/// Every text node under `group`, with its box in page coordinates.
fn rendered_texts(group: &usvg::Group, out: &mut Vec<(String, TextBox)>) {
    for node in group.children() {
        match node {
            usvg::Node::Group(g) => rendered_texts(g, out),
            usvg::Node::Text(t) => {
                let text: String = t.chunks().iter().map(|c| c.text()).collect();
                let r = t.abs_bounding_box();
                let (left, right) = (f64::from(r.left()), f64::from(r.right()));
                let (top, bottom) = (f64::from(r.top()), f64::from(r.bottom()));
                out.push((text.trim().to_string(), (left, right, top, bottom)));
            }
            _ => {}
        }
    }
}

/// Renders the SVG at `path` to PNG (kept under `$KPLACE_PLOTS_PNG` as `name.png`) and checks
/// that it is not blank and that every text was drawn.
fn render(path: &Path, name: &str) -> Picture {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = usvg::Options {
        fontdb: fonts(),
        ..Default::default()
    };
    let tree = usvg::Tree::from_data(&data, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let els = parse(path);
    let written: Vec<&El> = els
        .iter()
        .filter(|e| e.tag == "text" && !e.text.is_empty())
        .collect();
    let texts = if options.fontdb.is_empty() {
        written
            .iter()
            .map(|t| (t.text.clone(), text_box(t)))
            .collect()
    } else {
        let mut texts = Vec::new();
        rendered_texts(tree.root(), &mut texts);
        texts.retain(|(t, _)| !t.is_empty());
        assert_eq!(texts.len(), written.len(), "{name}: a text was not drawn");
        texts
    };
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).expect("a page size");
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let inked = pixmap
        .pixels()
        .iter()
        .filter(|p| (p.red(), p.green(), p.blue()) != (255, 255, 255))
        .count();
    let total = pixmap.pixels().len();
    assert!(
        inked * 100 > total,
        "{name}: only {inked} of {total} pixels drawn"
    );
    let png = pixmap.encode_png().expect("PNG encoding");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 1000, "{name}");
    if let Some(dir) = std::env::var_os("KPLACE_PLOTS_PNG") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }
    Picture {
        name: name.to_string(),
        size: (f64::from(size.width()), f64::from(size.height())),
        texts,
        els,
    }
}

/// Every text that leaves the page, and every two that overlap by more than half a pixel
/// either way.
fn text_faults(p: &Picture) -> Vec<String> {
    let mut faults = Vec::new();
    for (i, (a, ba)) in p.texts.iter().enumerate() {
        if ba.0 < -0.5 || ba.1 > p.size.0 + 0.5 || ba.2 < -0.5 || ba.3 > p.size.1 + 0.5 {
            faults.push(format!("{a:?} leaves the page: {ba:?}"));
        }
        for (b, bb) in &p.texts[i + 1..] {
            if ba.0 < bb.1 - 0.5 && bb.0 < ba.1 - 0.5 && ba.2 < bb.3 - 0.5 && bb.2 < ba.3 - 0.5 {
                faults.push(format!("{a:?} {ba:?} overlaps {b:?} {bb:?}"));
            }
        }
    }
    faults
}

/// No text leaves the page, and no two overlap.
fn assert_texts_apart(p: &Picture) {
    let faults = text_faults(p);
    assert!(faults.is_empty(), "{}:\n{}", p.name, faults.join("\n"));
}

#[test]
fn overlapping_texts_are_found_as_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overlap.svg");
    let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="300" height="100">
<rect x="0" y="0" width="300" height="100" fill="#0072B2"/>
<text x="10" y="40" font-family="sans-serif" font-size="14">a label of some length</text>
<text x="60" y="45" font-family="sans-serif" font-size="14">another</text>
<text x="10" y="90" font-family="sans-serif" font-size="14">apart</text>
</svg>"##;
    std::fs::write(&path, svg).unwrap();
    let picture = render(&path, "overlap");
    assert_eq!(picture.texts.len(), 3);
    let faults = text_faults(&picture);
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains("another"), "{faults:?}");
}

/// Where an element is drawn: its centre (a marker) or its first point.
fn place(e: &El) -> (f64, f64) {
    let num = |k: &str| e.attrs.get(k).and_then(|v| v.parse::<f64>().ok());
    if let (Some(x), Some(y)) = (num("cx"), num("cy")) {
        return (x, y);
    }
    if let (Some(x), Some(y)) = (num("x"), num("y")) {
        return (x, y);
    }
    let points = e.points();
    if points.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = points.len() as f64;
    (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    )
}

/// The shape of a filled marker.
fn shape_of(e: &El) -> Option<Shape> {
    let points = e.points();
    match (e.tag.as_str(), points.len()) {
        ("circle", _) => Some(Shape::Circle),
        ("polygon", 3) if points[0].1 < points[1].1 => Some(Shape::TriangleUp),
        ("polygon", 3) => Some(Shape::TriangleDown),
        ("polygon", 4) if (points[0].1 - points[1].1).abs() < 0.5 => Some(Shape::Square),
        ("polygon", 4) => Some(Shape::Diamond),
        _ => None,
    }
}

/// The (colour, marker) pair of every series key of the legend: a filled marker in a series
/// colour, or a bar's block with the white marker it carries.
fn legend_pairs(p: &Picture) -> Vec<(String, Shape)> {
    let legend_x = p.size.0 - f64::from(LEGEND_WIDTH);
    let palette: Vec<String> = PALETTE.iter().map(|c| hex(*c)).collect();
    let keys: Vec<&El> = p.els.iter().filter(|e| place(e).0 >= legend_x).collect();
    let mut pairs = Vec::new();
    for e in &keys {
        let fill = e.attr("fill").to_string();
        if !palette.contains(&fill) {
            continue;
        }
        if let Some(shape) = shape_of(e) {
            pairs.push((fill, shape));
        } else if e.tag == "rect" {
            let (x, y, w, h) = (e.num("x"), e.num("y"), e.num("width"), e.num("height"));
            let glyph = keys.iter().find(|g| {
                let (gx, gy) = place(g);
                g.attr("fill") == "#FFFFFF" && gx > x && gx < x + w && gy > y && gy < y + h
            });
            let shape = glyph.and_then(|g| shape_of(g));
            let shape = shape.unwrap_or_else(|| panic!("{}: a bar key without its marker", p.name));
            pairs.push((fill, shape));
        }
    }
    pairs
}

/// Every series key of the legend has its own (colour, marker) pair, there are `expected` of
/// them where that is known, and each colour is drawn in the data.
fn assert_series_distinct(p: &Picture, expected: Option<usize>) {
    let pairs = legend_pairs(p);
    let distinct: HashSet<&(String, Shape)> = pairs.iter().collect();
    assert_eq!(distinct.len(), pairs.len(), "{}: {pairs:?}", p.name);
    if let Some(n) = expected {
        assert_eq!(pairs.len(), n, "{}: {pairs:?}", p.name);
    }
    let legend_x = p.size.0 - f64::from(LEGEND_WIDTH);
    for (colour, _) in &pairs {
        let drawn = p.els.iter().any(|e| {
            place(e).0 < legend_x && (e.attr("fill") == colour || e.attr("stroke") == colour)
        });
        assert!(
            drawn,
            "{}: the legend's {colour} is not in the data",
            p.name
        );
    }
}

/// Writes the five plots of `files` into a new directory, renders and checks each: series
/// expected per plot where known (latency, sustained, cdf, stages, loads).
fn check_sweep(label: &str, files: &[SweepFile], expected: [Option<usize>; 5]) {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(files, dir.path()).unwrap();
    for (path, expected) in paths.iter().zip(expected) {
        let stem = path.file_stem().unwrap().to_string_lossy();
        let picture = render(path, &format!("{label}-{stem}"));
        assert_texts_apart(&picture);
        assert_series_distinct(&picture, expected);
    }
}

/// The committed results directories and the files plotted together in each, as
/// `docs/results` says they were.
fn committed_results() -> Vec<(String, Vec<PathBuf>)> {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
    let mut sets: Vec<(String, Vec<PathBuf>)> = [
        "bisect-rate/default",
        "bisect-rate/workers",
        "bisect-rate/spectrogram-5MSps",
        "bisect-rate/spectrogram-20MSps",
        "tune/side-by-side",
        "spectrogram",
    ]
    .iter()
    .map(|d| {
        (
            d.replace('/', "-"),
            vec![results.join(d).join("bisect-rate.json")],
        )
    })
    .collect();
    let mut peers = Vec::new();
    for shape in ["1024x128", "2048x256"] {
        for system in ["kplace", "numpy", "numpy-tuned", "gnuradio", "gnuradio-cpp"] {
            peers.push(results.join(format!("peers/{system}-{shape}.json")));
        }
    }
    sets.push(("peers".to_string(), peers));
    sets
}

#[test]
fn the_plots_of_every_committed_results_file_render_legibly() {
    for (label, paths) in committed_results() {
        let files: Vec<SweepFile> = paths
            .iter()
            .map(|p| read_results(p).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let sweep = Sweep::new(&files);
        let series = Some(sweep.groups.len());
        let systems = Some(sweep.systems().len());
        check_sweep(&label, &files, [series, systems, None, None, Some(0)]);
    }
}

#[test]
fn a_search_without_a_rate_and_a_skipped_one_render_legibly() {
    check_sweep(
        "synthetic",
        &[sweep()],
        [Some(4), Some(2), Some(3), Some(5), Some(0)],
    );
}

/// Twelve systems at one frame shape, each searched once; every third found no rate.
fn twelve_systems() -> SweepFile {
    let mut file = sweep();
    file.searches = (0..12)
        .map(|i| {
            let rate = 200.0 + 40.0 * i as f64;
            let found = i % 3 != 2;
            let mut s = search(&format!("system-{i}"), "1024x128", 0, found.then_some(rate));
            let p99 = 1.0 + 0.1 * i as f64;
            s.trials = vec![
                trial(
                    100.0,
                    TrialStatus::Passed,
                    Some(p99),
                    Some(histogram(&[800, 900 + 10 * i, 1_500])),
                ),
                // Trials of different systems at the same rate and latency.
                trial(rate, TrialStatus::Passed, Some(2.0), None),
                trial(rate * 1.1, TrialStatus::Failed, Some(30.0), None),
                trial(rate * 1.2, TrialStatus::Invalid, None, None),
            ];
            s.trials[1].stages = vec![
                stage("range_fft", "cpu", 1.0, None),
                stage("cfar", "cpu", 0.5, None),
            ];
            if found {
                answered(&mut s, rate);
            }
            s
        })
        .collect();
    file
}

#[test]
fn twelve_series_each_have_their_own_colour_and_marker() {
    check_sweep(
        "twelve",
        &[twelve_systems()],
        [Some(12), Some(12), Some(12), Some(2), Some(0)],
    );
}

/// A trace of two frames on a worker and the collector, and the GPU's spans when `gpu`.
fn trace(gpu: bool) -> Trace {
    let mut spans = vec![
        span(SpanKind::Packets, Track::Source, None, 0, 4_000_000),
        span(
            SpanKind::Launch,
            Track::Worker(0),
            Some(0),
            4_100_000,
            6_000_000,
        ),
        span(
            SpanKind::Launch,
            Track::Worker(0),
            Some(1),
            6_000_000,
            7_000_000,
        ),
        span(
            SpanKind::Deliver,
            Track::Collector,
            None,
            7_200_000,
            7_200_000,
        ),
        // After the window.
        span(
            SpanKind::Launch,
            Track::Worker(0),
            Some(2),
            30_000_000,
            31_000_000,
        ),
    ];
    if gpu {
        spans.extend([
            span(
                SpanKind::Enqueue,
                Track::Worker(1),
                Some(1),
                4_200_000,
                4_300_000,
            ),
            span(
                SpanKind::Fence,
                Track::Worker(1),
                Some(1),
                4_300_000,
                4_400_000,
            ),
            span(
                SpanKind::Callback,
                Track::Worker(1),
                Some(1),
                5_000_000,
                5_000_000,
            ),
        ]);
    }
    Trace {
        spans,
        stages: vec!["range_fft".into(), "doppler_fft".into(), "cfar".into()],
        dropped_spans: 0,
        ..Trace::default()
    }
}

#[test]
fn a_timeline_lists_only_what_it_draws_and_ends_at_the_window() {
    for gpu in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.svg");
        timeline::write(&path, &trace(gpu), 0, 16_000_000).unwrap();
        let picture = render(&path, if gpu { "trace-gpu" } else { "trace-cpu" });
        assert_texts_apart(&picture);
        let words: Vec<&str> = picture.texts.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(words.iter().any(|t| t.contains("GPU")), gpu, "{words:?}");
        assert!(words.contains(&"range_fft") && words.contains(&"doppler_fft"));
        assert!(
            !words.contains(&"cfar"),
            "cfar ran after the window: {words:?}"
        );
        // The time axis ends at the window's 16 ms, not past it.
        let ticks: Vec<f64> = words.iter().filter_map(|t| t.parse::<f64>().ok()).collect();
        let last = ticks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!((14.0..=16.0).contains(&last), "last tick {last}: {ticks:?}");
    }
}

#[test]
fn every_committed_plot_renders_legibly() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut plots = Vec::new();
    let mut dirs = vec![docs.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "svg") {
                plots.push(path);
            }
        }
    }
    plots.sort();
    assert!(plots.len() >= 30, "{plots:?}");
    for path in plots {
        let name = path
            .strip_prefix(&docs)
            .unwrap()
            .display()
            .to_string()
            .replace('/', "-");
        let picture = render(&path, &format!("docs-{}", name.trim_end_matches(".svg")));
        assert_texts_apart(&picture);
        if !name.starts_with("trace") {
            assert_series_distinct(&picture, None);
        }
    }
}

#[test]
fn the_picture_of_a_run_that_adapts_renders_legibly() {
    use kplace::report::trace::{Span, SpanKind, Track};
    let at = |kind, frame, ns: u64| Span::new(kind, Track::Source, frame, ns, ns);
    let mut spans = Vec::new();
    // 3 s at 250 frames per second; a co-tenant slows placement 0 from 1 s, the run moves to
    // placement 1, probes placement 0 at 2 s, and stays there.
    let lane_at = |t: u64| u32::from((1_020_000_000..2_000_000_000).contains(&t));
    for frame in 0..750u64 {
        let t = frame * 4_000_000;
        let lane = lane_at(t);
        let latency = match (lane, (1_000_000_000..2_000_000_000).contains(&t)) {
            (0, true) => 9_000_000 + (t - 1_000_000_000) / 2,
            (0, false) => 2_000_000,
            _ => 1_500_000,
        };
        spans.push(Span::new(
            SpanKind::Packets,
            Track::Source,
            frame,
            t,
            t + 500_000,
        ));
        spans.push(at(SpanKind::Deliver, frame, t + 500_000 + latency).on_lane(lane));
    }
    spans.push(at(SpanKind::Switch, 255, 1_021_000_000).on_lane(1));
    spans.push(at(SpanKind::Switch, 500, 2_001_000_000).on_lane(0));
    let trace = Trace {
        spans,
        placements: vec!["all-gpu".into(), "all-cpu-pinned".into()],
        ..Trace::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switches.svg");
    super::super::switches::write(&path, &trace, Some(5.0)).unwrap();
    let picture = render(&path, "switches");
    assert_texts_apart(&picture);
    let words: Vec<&str> = picture.texts.iter().map(|(t, _)| t.as_str()).collect();
    for word in [
        "\u{2192} all-cpu-pinned",
        "\u{2192} all-gpu",
        "the latency budget",
    ] {
        assert!(words.iter().any(|w| w.contains(word)), "{word}: {words:?}");
    }
}
