//! `kplace record`: a recording of a graph's source tensor, synthesized (tones in noise; on a
//! source with a channel axis, plane waves across the array), for any graph whose source is
//! numeric and has a SigMF type: the input `kplace run --recording` and `kplace send
//! --recording` take (`kplace::workload::synthesis`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kplace::model::graph::{GraphSource, Overrides};
use kplace::workload::recording;
use kplace::workload::synthesis::{self, Synthesis, Tone};

use super::args::ShapeArgs;

/// Options of `kplace record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The graph whose source tensor the recording's frames fill: a file or a name.
    #[arg(long, value_name = "FILE|NAME")]
    graph: PathBuf,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Frames to record: a replay or a sender cycles through them.
    #[arg(long, default_value_t = 16)]
    frames: u64,
    /// A tone: FREQ:AMPLITUDE[:ANGLE], the frequency in cycles per sample in [-0.5, 0.5), the
    /// amplitude a fraction of full scale, and on a source with a channel axis the angle it
    /// arrives from, degrees from broadside (a plane wave on a uniform linear array, elements
    /// half a wavelength apart; default 0) (repeatable) [default: 0.125:0.25:20 and
    /// -0.3:0.05:-40].
    #[arg(long = "tone", value_name = "FREQ:AMP[:ANGLE]", value_parser = parse_tone, allow_hyphen_values = true)]
    tones: Vec<Tone>,
    /// The noise's standard deviation per real component, a fraction of full scale.
    #[arg(long, default_value_t = 0.01)]
    noise: f64,
    /// The noise generator's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Samples per second per channel, written to the metadata: it sets the recording's
    /// real-time frame rate (a frame's samples per channel at this rate), whose period must be
    /// from 1 ns to 1 day.
    #[arg(long, default_value_t = 20e6)]
    sample_rate: f64,
    /// The data file (`NAME.sigmf-data`; `NAME.sigmf-meta` is written beside it).
    #[arg(long)]
    out: PathBuf,
}

fn parse_tone(text: &str) -> Result<Tone, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let number = |what: &str, value: &str| -> Result<f64, String> {
        value.parse().map_err(|e| format!("{what} {value:?}: {e}"))
    };
    let (f, a, angle) = match parts[..] {
        [f, a] => (f, a, None),
        [f, a, angle] => (f, a, Some(angle)),
        _ => {
            return Err("expected FREQ:AMPLITUDE[:ANGLE], e.g. 0.125:0.25 or 0.125:0.25:30".into());
        }
    };
    Ok(Tone {
        frequency: number("frequency", f)?,
        amplitude: number("amplitude", a)?,
        angle_deg: angle
            .map(|a| number("angle", a))
            .transpose()?
            .unwrap_or(0.0),
    })
}

/// Synthesizes the recording and writes it with its metadata.
pub fn main(mut args: RecordArgs) -> anyhow::Result<ExitCode> {
    args.graph = super::args::graph_file(&args.graph)?;
    if args.frames == 0 {
        anyhow::bail!("--frames must be at least 1");
    }
    kplace::report::output::file_only(&args.out, "--out")?;
    let source = GraphSource::read(&args.graph)?;
    let overrides = Overrides {
        dims: args.shape.dims(&source)?,
        params: args.shape.params(),
    };
    let graph = source.bind(&overrides)?;
    let synthesis = Synthesis {
        tones: if args.tones.is_empty() {
            vec![
                Tone {
                    angle_deg: 20.0,
                    ..Tone::new(0.125, 0.25)
                },
                Tone {
                    angle_deg: -40.0,
                    ..Tone::new(-0.3, 0.05)
                },
            ]
        } else {
            args.tones.clone()
        },
        noise: args.noise,
        seed: args.seed,
        sample_rate: args.sample_rate,
    };
    let tensor = graph.tensor(graph.source.tensor);
    // The rate paces the recording's frames: refused now if their period is out of range,
    // rather than written into metadata that no run would then load.
    let samples = tensor.shape.iter().product::<u64>() / graph.source.channels(&graph).max(1);
    kplace::model::rate::sample_period("--sample-rate", args.sample_rate, samples)?;
    let frames = synthesis::synthesize(&graph, args.frames, &synthesis)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("kplace record: graph {}", args.graph.display()))?;
    let channels = graph.source.channels(&graph);
    let tones: Vec<String> = synthesis
        .tones
        .iter()
        .map(|t| match channels {
            1 => format!("{}:{}", t.frequency, t.amplitude),
            _ => format!("{}:{}:{}", t.frequency, t.amplitude, t.angle_deg),
        })
        .collect();
    let description = format!(
        "kplace record: {} frames of {} {:?} for graph {}; tones {} (cycles/sample:amplitude{}), noise {}, seed {}",
        args.frames,
        tensor.dtype.name().unwrap_or("?"),
        tensor.shape,
        graph.name,
        tones.join(" "),
        if channels == 1 {
            String::new()
        } else {
            format!(":degrees, on {channels} channels half a wavelength apart")
        },
        synthesis.noise,
        synthesis.seed
    );
    let (data, meta) = recording::write(
        &args.out,
        &graph,
        &frames,
        Some(synthesis.sample_rate),
        &description,
    )?;
    println!(
        "recorded {} frames of {} {:?} ({}) to {} and {}",
        args.frames,
        tensor.dtype.name().unwrap_or("?"),
        tensor.shape,
        kplace::plan::human_bytes(tensor.bytes.saturating_mul(args.frames)),
        data.display(),
        meta.display()
    );
    Ok(ExitCode::SUCCESS)
}
