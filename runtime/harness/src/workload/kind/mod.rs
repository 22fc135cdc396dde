//! Workload kinds: the families of workloads kplace runs, looked up by name.
//!
//! A graph file names the workload that feeds and judges it (`workload: NAME`); a
//! [`WorkloadKind`] is what that name stands for: the options it takes, and how it turns a
//! run's [`Request`] into a [`Prepared`] workload (its frames, its judge, and the graph and
//! placement each pipeline plans). A program registers every kind it ships in one
//! [`Registry`]; everything else looks kinds up by name, so adding a workload is one crate and
//! one registration. The [`recording`](RecordingKind) kind is built in: it runs any graph on a
//! recording of its source, checked against a reference.
//!
//! What each layer needs of a kind is a trait of its own, each a supertrait of
//! [`WorkloadKind`]: [`KindOptions`] (a program's command line: name, about, options),
//! [`ResultsFiles`] (the results it writes, judges and compares), [`SweepWords`] (a rate
//! sweep's words and defaults); [`WorkloadKind`] itself is what the harness needs to prepare
//! a run. A layer imports only the trait it calls.
//!
//! Guarantees: a name is registered once; a graph naming a kind nobody registered, or an
//! option its kind does not take, is refused with the names that would work; every option
//! value is checked by its kind before anything frame-sized is allocated.

mod options;
mod results;
mod sweep;

pub use options::{KindOptions, OptionSpec, WorkloadOptions};
pub use results::{ResultsComparison, ResultsFiles, ResultsPair};
pub use sweep::SweepWords;

use std::path::PathBuf;
use std::sync::Arc;

use super::Workload;
use super::generic::{PrepareError, RecordingSetup};
use super::reference::CheckSpec;
use kplace_core::model::files::{FilesError, GraphFiles};
use kplace_core::model::graph::{Graph, GraphError, Overrides};
use kplace_core::model::placement::Placement;

/// A recording to run the graph on, and what its frames are checked against.
#[derive(Clone, Debug)]
pub struct RecordingRequest {
    /// The recording (raw frames, with SigMF metadata beside them).
    pub path: PathBuf,
    /// What each frame's sinks are checked against.
    pub check: CheckSpec,
}

/// What a run asks of its workload, whatever the workload.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The graph and placement files and their overrides (dimensions included).
    pub files: &'a GraphFiles,
    /// The kind's own options, checked with [`WorkloadOptions::check`].
    pub options: &'a WorkloadOptions,
    /// A recording to run on instead of the kind's own frames.
    pub recording: Option<&'a RecordingRequest>,
    /// The seed of whatever the kind generates.
    pub seed: u64,
    /// Frames the run processes (`u64::MAX`: until stopped).
    pub frames: u64,
    /// Pipelines the run plans, each with its own pools (memory checks count them all; 0 for
    /// a run that plans none, such as a sender).
    pub pipelines: u64,
    /// Whether the run replays the frames from memory, so that they must be prepared now.
    pub replay: bool,
}

/// A workload ready to run: what every pipeline of a run shares.
pub trait Prepared: Send + Sync {
    /// The workload: its frames and its judge.
    fn workload(&self) -> &dyn Workload;

    /// The graph and placement one pipeline plans, bound as the workload was prepared
    /// (its dimensions, its parameters, slots sized for its real-time rate).
    fn load(&self) -> Result<(Graph, Placement), KindError>;

    /// [`Prepared::load`] with `placement` instead of the run's: another placement a run that
    /// adapts may switch to, bound the same way.
    fn load_as(&self, placement: &Placement) -> Result<(Graph, Placement), KindError>;
}

/// A family of workloads, registered by name: what the harness needs to prepare a run of
/// it, beside what each other layer needs of it (its supertraits): [`KindOptions`] for a
/// program's command line, [`ResultsFiles`] for the results it writes and reads, and
/// [`SweepWords`] for a rate sweep.
pub trait WorkloadKind: KindOptions + ResultsFiles + SweepWords + Send + Sync {
    /// The real-time frame period of `graph` as bound (what sizes `slots: auto` when a plan is
    /// only printed), when the graph alone decides it.
    fn frame_period(&self, graph: &Graph) -> Option<std::time::Duration> {
        let _ = graph;
        None
    }

    /// Checks `request` against the graph and this machine and prepares the workload.
    fn prepare(&self, request: &Request<'_>) -> Result<Box<dyn Prepared>, KindError>;
}

impl std::fmt::Debug for dyn WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorkloadKind({})", self.name())
    }
}

/// Why a workload could not be found or prepared.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// The graph names a workload nobody registered.
    #[error(
        "graph {}: unknown workload {name:?}; kplace knows {}, or runs any graph on a recording (--recording FILE)",
        graph.display(),
        known.join(", ")
    )]
    Unknown {
        /// The graph file.
        graph: PathBuf,
        /// The name it gives.
        name: String,
        /// The names registered.
        known: Vec<&'static str>,
    },
    /// The graph names no workload and no recording was given.
    #[error(
        "graph {} names no workload: run it on a recording of its source with --recording FILE (`kplace record` makes one) and --check reference:PLACEMENT, or name a workload in it (`workload: NAME`; kplace knows {})",
        graph.display(),
        known.join(", ")
    )]
    Unnamed {
        /// The graph file.
        graph: PathBuf,
        /// The names registered.
        known: Vec<&'static str>,
    },
    /// An option is unknown, repeated or has a value its kind refuses.
    #[error("workload option {name} {why}")]
    Option {
        /// The option's name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The graph cannot be loaded.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The graph or placement files cannot be loaded as asked.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The recording workload could not be prepared.
    #[error(transparent)]
    Recording(#[from] PrepareError),
    /// The kind's own reason, in its words.
    #[error(transparent)]
    Kind(Box<dyn std::error::Error + Send + Sync>),
}

/// Every workload kind a program ships, by name.
pub struct Registry {
    kinds: Vec<Arc<dyn WorkloadKind>>,
    /// The built-in [`RecordingKind`].
    recording: Arc<dyn WorkloadKind>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry holding only the built-in recording kind.
    pub fn new() -> Registry {
        Registry {
            kinds: Vec::new(),
            recording: Arc::new(RecordingKind),
        }
    }

    /// Registers `kind`.
    ///
    /// # Panics
    /// When a kind of the same name is registered already: a program's registrations are
    /// fixed when it is written, so this is its bug, never a user's.
    pub fn register(mut self, kind: impl WorkloadKind + 'static) -> Registry {
        assert!(
            self.get(kind.name()).is_none(),
            "workload {} is registered twice",
            kind.name()
        );
        self.kinds.push(Arc::new(kind));
        self
    }

    /// The kind registered as `name`, the built-in recording kind included.
    pub fn get(&self, name: &str) -> Option<&dyn WorkloadKind> {
        self.shared_ref(name).map(|k| k.as_ref())
    }

    /// The kind registered as `name`, shared (for a tool that keeps it beside its settings).
    pub fn shared(&self, name: &str) -> Option<Arc<dyn WorkloadKind>> {
        self.shared_ref(name).cloned()
    }

    /// A kind a program registered as `name` (a graph file names only those).
    fn registered(&self, name: &str) -> Option<&Arc<dyn WorkloadKind>> {
        self.kinds.iter().find(|k| k.name() == name)
    }

    /// [`Registry::registered`], or the built-in recording kind by its name.
    fn shared_ref(&self, name: &str) -> Option<&Arc<dyn WorkloadKind>> {
        self.registered(name)
            .or_else(|| (name == self.recording.name()).then_some(&self.recording))
    }

    /// Every kind, the built-in recording kind last.
    pub fn kinds(&self) -> impl Iterator<Item = &dyn WorkloadKind> {
        self.kinds
            .iter()
            .map(|k| k.as_ref())
            .chain(std::iter::once(self.recording.as_ref()))
    }

    /// Every name, the recording kind's last.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds().map(|k| k.name()).collect()
    }

    /// The kind that runs `graph`: the recording kind when a recording is given, else the one
    /// the graph names.
    pub fn for_graph(
        &self,
        graph: &Graph,
        recording: bool,
    ) -> Result<&dyn WorkloadKind, KindError> {
        if recording {
            return Ok(self.recording.as_ref());
        }
        let known = || self.kinds.iter().map(|k| k.name()).collect();
        match graph.workload.as_deref() {
            Some(name) => {
                self.registered(name)
                    .map(|k| k.as_ref())
                    .ok_or_else(|| KindError::Unknown {
                        graph: graph.path.clone(),
                        name: name.to_string(),
                        known: known(),
                    })
            }
            None => Err(KindError::Unnamed {
                graph: graph.path.clone(),
                known: known(),
            }),
        }
    }

    /// The kind that runs the graph of `request` (read once, with its dimension bindings),
    /// with the request's options checked against it; [`WorkloadKind::prepare`] then prepares
    /// the workload.
    pub fn kind_for(&self, request: &Request<'_>) -> Result<&dyn WorkloadKind, KindError> {
        let graph = request.files.shaped_graph()?;
        let kind = self.for_graph(&graph, request.recording.is_some())?;
        request.options.check(kind)?;
        Ok(kind)
    }
}

/// The built-in kind: any graph on a recording of its source, each frame checked against a
/// reference ([`super::generic`]). Graph files do not name it; `--recording` selects it.
pub struct RecordingKind;

impl KindOptions for RecordingKind {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn about(&self) -> &'static str {
        "any graph on a recording of its source, every frame's sinks checked against a reference placement or golden files"
    }

    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
}

/// It writes no results of its own: its sinks are written as `.npy` files (`--write-sinks`).
impl ResultsFiles for RecordingKind {}

/// A recording's frames are generic: frames, extents.
impl SweepWords for RecordingKind {}

impl WorkloadKind for RecordingKind {
    fn prepare(&self, request: &Request<'_>) -> Result<Box<dyn Prepared>, KindError> {
        let Some(recording) = request.recording else {
            return Err(KindError::Option {
                name: "recording".into(),
                why: "is needed: the recording workload runs on a recording (--recording FILE)"
                    .into(),
            });
        };
        let setup = RecordingSetup::new(
            request.files.clone(),
            Overrides::default(),
            &recording.path,
            &recording.check,
        )?;
        Ok(Box::new(setup))
    }
}

impl Prepared for RecordingSetup {
    fn workload(&self) -> &dyn Workload {
        &self.workload
    }

    fn load(&self) -> Result<(Graph, Placement), KindError> {
        Ok(RecordingSetup::load(self)?)
    }

    fn load_as(&self, placement: &Placement) -> Result<(Graph, Placement), KindError> {
        let files = self.files.with_placement(placement.clone());
        Ok(files.load_with(self.overrides.clone(), self.period)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake;

    impl KindOptions for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn about(&self) -> &'static str {
            "a test kind"
        }
        fn options(&self) -> &'static [OptionSpec] {
            &[
                OptionSpec {
                    name: "target",
                    value: "X",
                    help: "",
                    repeatable: true,
                    flag: false,
                },
                OptionSpec {
                    name: "pfa",
                    value: "P",
                    help: "",
                    repeatable: false,
                    flag: false,
                },
            ]
        }
    }
    impl ResultsFiles for Fake {}
    impl SweepWords for Fake {}
    impl WorkloadKind for Fake {
        fn prepare(&self, _: &Request<'_>) -> Result<Box<dyn Prepared>, KindError> {
            Err(KindError::Kind("not preparable".into()))
        }
    }

    fn options(pairs: &[(&str, &str)]) -> WorkloadOptions {
        let mut o = WorkloadOptions::default();
        for (n, v) in pairs {
            o.push(*n, *v);
        }
        o
    }

    #[test]
    fn options_a_kind_does_not_take_are_refused_naming_those_it_takes() {
        let e = options(&[("pfa", "1e-6"), ("seed", "3")])
            .check(&Fake)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "workload option seed is not an option of workload fake, which takes target, pfa"
        );
        let e = options(&[("pfa", "1")])
            .check(&RecordingKind)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("which takes none"), "{e}");
    }

    #[test]
    fn an_option_taken_once_is_refused_twice_and_a_repeatable_one_keeps_every_value() {
        let twice = options(&[("pfa", "1e-6"), ("pfa", "1e-5")]);
        assert!(
            twice
                .check(&Fake)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let targets = options(&[("target", "a"), ("target", "b")]);
        targets.check(&Fake).unwrap();
        assert_eq!(targets.all("target").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(targets.get("target"), Some("b"));
    }

    #[test]
    fn values_parse_or_name_the_option_and_switches_take_true_or_false() {
        let o = options(&[("pfa", "x"), ("on", "true"), ("bad", "yes")]);
        let e = o.parse::<f64>("pfa").unwrap_err().to_string();
        assert!(e.starts_with("workload option pfa \"x\": "), "{e}");
        assert_eq!(o.parse::<f64>("absent").unwrap(), None);
        assert!(o.switch("on").unwrap());
        assert!(!o.switch("absent").unwrap());
        assert!(o.switch("bad").is_err());
    }

    #[test]
    fn kinds_are_found_by_name_with_the_recording_kind_built_in() {
        let registry = Registry::new().register(Fake);
        assert_eq!(registry.names(), ["fake", "recording"]);
        assert_eq!(registry.get("fake").map(|k| k.name()), Some("fake"));
        assert!(registry.get("radio").is_none());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn a_name_registers_once() {
        let _ = Registry::new().register(Fake).register(Fake);
    }

    fn graph(workload: Option<&str>) -> Graph {
        let text = format!(
            "name: g\n{}dims: {{N: 8}}\nsource: {{tensor: x, packet_axis: 0}}\n\
             tensors:\n  - {{name: x, dtype: f32, shape: [N]}}\n  - {{name: y, dtype: f32, shape: [N]}}\n\
             stages:\n  - {{name: s, kernel: k, inputs: [x], outputs: [y]}}\nsinks: [y]\n",
            workload
                .map(|w| format!("workload: {w}\n"))
                .unwrap_or_default()
        );
        Graph::parse(&text, std::path::Path::new("g.yaml"), &Overrides::default()).unwrap()
    }

    #[test]
    fn a_graph_finds_the_kind_it_names_and_an_unknown_or_missing_name_says_what_would_work() {
        let registry = Registry::new().register(Fake);
        let kind = registry.for_graph(&graph(Some("fake")), false).unwrap();
        assert_eq!(kind.name(), "fake");
        let kind = registry.for_graph(&graph(Some("fake")), true).unwrap();
        assert_eq!(kind.name(), "recording", "a recording runs any graph");
        let e = registry
            .for_graph(&graph(Some("sonar")), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("graph g.yaml: unknown workload \"sonar\"; kplace knows fake, or runs"),
            "{e}"
        );
        let e = registry
            .for_graph(&graph(None), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("names no workload") && e.contains("kplace knows fake"),
            "{e}"
        );
    }
}
