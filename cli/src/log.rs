//! What the binary says on stderr, through `tracing`.
//!
//! Every message the binary prints about its progress (what it is running, where it listens,
//! what it skipped) is an `info` event; what may need attention is a `warn` event; the
//! libraries add `debug` events about their choices (devices opened, slots built, socket
//! buffers granted). Each message names its command (`kplace run: ...`), so an `info`, `warn`
//! or `error` line is printed as the message alone; a `debug` or `trace` line starts with
//! `kplace: debug <target>:`.
//!
//! The level is `info`; `-q` shows warnings and errors only, `-qq` (or more) errors only, so a
//! failing command always says why; `-v` adds
//! debug events and `-vv` trace events. `RUST_LOG` (an `EnvFilter` directive such as
//! `kplace=debug` or `warn`), when set, replaces the level the flags chose.
//!
//! Each line is formatted whole and written to stderr in one write, so the lines of several
//! processes or threads sharing stderr never interleave mid-line. The command's own output
//! (tables, verdicts, reports) is not logging: it goes to stdout, or to stderr when stdout
//! carries a report, whatever the level.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The level `-v` and `-q` choose: `info`, one step more verbose per `-v`, one quieter per
/// `-q` (they cancel).
pub fn level(verbose: u8, quiet: u8) -> LevelFilter {
    match i16::from(verbose) - i16::from(quiet) {
        // Never quieter than errors: a failing command always says why.
        ..=-2 => LevelFilter::ERROR,
        -1 => LevelFilter::WARN,
        0 => LevelFilter::INFO,
        1 => LevelFilter::DEBUG,
        2.. => LevelFilter::TRACE,
    }
}

/// Installs the stderr subscriber for the whole process: `RUST_LOG` when set (an invalid one is
/// reported and the flags' level used instead), else [`level`].
pub fn init(verbose: u8, quiet: u8) {
    let flags = level(verbose, quiet);
    let from_flags = || EnvFilter::default().add_directive(flags.into());
    let (filter, bad_env) = match std::env::var("RUST_LOG") {
        Ok(text) if !text.trim().is_empty() => match EnvFilter::try_new(&text) {
            Ok(filter) => (filter, None),
            Err(e) => (from_flags(), Some((text, e))),
        },
        _ => (from_flags(), None),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(Lines)
        .init();
    if let Some((text, e)) = bad_env {
        tracing::warn!("kplace: warning: RUST_LOG={text:?} is not a filter ({e}); using {flags}");
    }
}

/// One line per event: the message (and any fields), prefixed with the level and target below
/// `info`.
struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        // tracing orders levels by verbosity: DEBUG and TRACE are "greater" than INFO.
        if *meta.level() > Level::INFO {
            let level = if *meta.level() == Level::DEBUG {
                "debug"
            } else {
                "trace"
            };
            write!(writer, "kplace: {level} {}: ", meta.target())?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_step_the_level_from_info() {
        assert_eq!(level(0, 0), LevelFilter::INFO);
        assert_eq!(level(1, 0), LevelFilter::DEBUG);
        assert_eq!(level(2, 0), LevelFilter::TRACE);
        assert_eq!(level(9, 0), LevelFilter::TRACE);
        assert_eq!(level(0, 1), LevelFilter::WARN);
        assert_eq!(level(0, 2), LevelFilter::ERROR);
        assert_eq!(level(0, 3), LevelFilter::ERROR, "errors are always shown");
        assert_eq!(level(1, 1), LevelFilter::INFO, "they cancel");
    }
}
