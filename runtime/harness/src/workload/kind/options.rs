//! What a program's command line needs of a workload kind: its name, what it is, and the
//! options it takes ([`KindOptions`]), and the options a run was given ([`WorkloadOptions`]),
//! checked against them.
//!
//! A binary lists and parses a kind's options from this alone, without preparing anything;
//! the kind reads the values it was given when it prepares a run.

use super::KindError;

/// What a program shows and parses of a workload kind: its name, one line about it, and its
/// options.
pub trait KindOptions {
    /// The name a graph file gives (`workload: NAME`).
    fn name(&self) -> &'static str;

    /// One line saying what it feeds and how it judges.
    fn about(&self) -> &'static str;

    /// The options it takes.
    fn options(&self) -> &'static [OptionSpec];
}

/// An option a workload kind takes: `NAME=VALUE` on `--opt`, or a flag of its own.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    /// Its name (`target`).
    pub name: &'static str,
    /// What its value is (`RANGE,VELOCITY,SNR`); empty for a switch, given as `NAME=true`.
    pub value: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Whether it may be given more than once.
    pub repeatable: bool,
    /// Whether a program also takes it as a flag of its own, `--NAME VALUE` (`--NAME` for a
    /// switch), where no option of the command has that name.
    pub flag: bool,
}

/// Options given to a workload kind, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadOptions {
    given: Vec<(String, String)>,
}

impl WorkloadOptions {
    /// Adds `name=value`.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.given.push((name.into(), value.into()));
    }

    /// Whether none was given.
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// The value of `name`, if given (the last, if given twice).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).last()
    }

    /// Every value of `name`, in order.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.given
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether switch `name` is on (`NAME=true`).
    pub fn switch(&self, name: &str) -> Result<bool, KindError> {
        match self.get(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(KindError::Option {
                name: name.to_string(),
                why: format!("is a switch: true or false, not {other:?}"),
            }),
        }
    }

    /// `name`'s value parsed, if given; the error names the option and the value.
    pub fn parse<T>(&self, name: &str) -> Result<Option<T>, KindError>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        self.get(name)
            .map(|v| {
                v.parse().map_err(|e| KindError::Option {
                    name: name.to_string(),
                    why: format!("{v:?}: {e}"),
                })
            })
            .transpose()
    }

    /// Refuses an option `kind` does not take, or one given twice that it takes once.
    pub fn check(&self, kind: &dyn KindOptions) -> Result<(), KindError> {
        let specs = kind.options();
        for (i, (name, _)) in self.given.iter().enumerate() {
            let Some(spec) = specs.iter().find(|s| s.name == name) else {
                let known: Vec<&str> = specs.iter().map(|s| s.name).collect();
                return Err(KindError::Option {
                    name: name.clone(),
                    why: format!(
                        "is not an option of workload {}, which takes {}",
                        kind.name(),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                });
            };
            if !spec.repeatable && self.given[..i].iter().any(|(n, _)| n == name) {
                return Err(KindError::Option {
                    name: name.clone(),
                    why: "is given twice: it takes one value".into(),
                });
            }
        }
        Ok(())
    }
}
