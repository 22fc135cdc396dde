//! What a rate sweep (`bisect-rate`, `tune`) needs of a workload kind beyond running it
//! ([`SweepWords`]): the unit its tables print, its own words for a frame's shape in a command
//! template, and the options every trial gives it unless told otherwise.
//!
//! Every method has a default, the generic words, for a kind with none of its own.

/// A kind's words and defaults for a rate sweep.
pub trait SweepWords {
    /// The unit of a rate of this workload's frames, as tables print it.
    fn rate_unit(&self) -> &'static str {
        "frames/s"
    }

    /// This workload's own words for a frame's shape and its extents, innermost axis first,
    /// which a command template (`bisect-rate --sut-cmd`) also takes beside the generic
    /// `{shape}` and `{extent0}`, `{extent1}`, ...: the radar's `cpi`, `samples` and `chirps`.
    fn shape_words(&self) -> (Option<&'static str>, &'static [&'static str]) {
        (None, &[])
    }

    /// Options a rate sweep gives this kind unless told otherwise, so that every trial's
    /// sender and receiver agree on them (the radar's distinct scene frames, which also bound
    /// the memory each holds).
    fn sweep_options(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}
