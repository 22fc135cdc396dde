//! A parameter whose value is none of the words it takes (`direction: sideways`): the error
//! of each block's parameter parser, saying the words.

/// A parameter's value that is none of its choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}")]
pub struct NotAChoice {
    /// The choices, in words (`forward or inverse`).
    pub expected: &'static str,
}
