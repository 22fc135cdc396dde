//! kplace's errors as Python sees them: `kplace.KplaceError`, whose message is kplace's, its
//! causes after it as `kplace` prints them.

use pyo3::PyErr;

pyo3::create_exception!(
    kplace,
    KplaceError,
    pyo3::exceptions::PyException,
    "An error of kplace's: a graph or placement not found or invalid, a plan that cannot run, a run that failed. The message is kplace's, with its causes."
);

/// The error's message, then each cause the message does not already say, separated by `: `.
pub fn message(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

/// A `KplaceError` carrying `error`'s message and causes.
pub fn kplace_error(error: &dyn std::error::Error) -> PyErr {
    KplaceError::new_err(message(error))
}
