//! A stage's parameters as the graph file writes them, and the text each reaches its kernel as.
//!
//! The ABI hands a kernel every parameter as text. A scalar arrives exactly as written
//! (`pfa: 1.0e-6` as `1.0e-6`), `$DIM` as the dimension's value; a list as its items joined by
//! `", "` (`angles: [-30, 0, 14.5]` as `-30, 0, 14.5`), and a list of lists (a matrix) as its
//! rows joined by `"; "` (`[[1, 2], [3, 4]]` as `1, 2; 3, 4`), each item a scalar as above.
//! Deeper nesting, or a matrix with a scalar for a row, is refused at its line. A value written
//! `{npy: FILE}` is the real array NumPy saved in FILE (relative to the graph file), as the
//! list or matrix it would be written as, each value in the shortest text that reads back to
//! it exactly: FIR taps or a weight matrix computed in NumPy, named rather than pasted.

use std::collections::BTreeMap;
use std::fmt;

use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// One parameter's value as written.
#[derive(Clone, Debug)]
pub(super) enum ParamFile {
    /// A string: its text.
    Text(String),
    /// A number or a boolean: its text is the file's, found by its span.
    Plain,
    /// A list of values.
    List(Vec<Spanned<ParamFile>>),
    /// `{npy: FILE}`: the array in an `.npy` file.
    Npy(String),
}

/// The most values a parameter read from an `.npy` file may hold.
pub(super) const MAX_NPY_VALUES: usize = 1 << 20;

impl<'de> Deserialize<'de> for ParamFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = ParamFile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string, a list of them, or {npy: FILE}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParamFile, A::Error> {
                let mut file = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "npy" if file.is_none() => file = Some(map.next_value::<String>()?),
                        "npy" => return Err(de::Error::custom("npy is given twice")),
                        other => {
                            return Err(de::Error::custom(format!(
                                "unknown key {other}: a parameter's map is {{npy: FILE}}"
                            )));
                        }
                    }
                }
                file.map(ParamFile::Npy)
                    .ok_or_else(|| de::Error::custom("a parameter's map is {npy: FILE}"))
            }
            fn visit_str<E>(self, v: &str) -> Result<ParamFile, E> {
                Ok(ParamFile::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<ParamFile, E> {
                Ok(ParamFile::Text(v))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ParamFile, E> {
                Ok(ParamFile::Plain)
            }
            fn visit_u64<E>(self, _: u64) -> Result<ParamFile, E> {
                Ok(ParamFile::Plain)
            }
            fn visit_f64<E>(self, _: f64) -> Result<ParamFile, E> {
                Ok(ParamFile::Plain)
            }
            fn visit_bool<E>(self, _: bool) -> Result<ParamFile, E> {
                Ok(ParamFile::Plain)
            }
            fn visit_unit<E: de::Error>(self) -> Result<ParamFile, E> {
                Err(E::custom("a parameter needs a value"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ParamFile, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(ParamFile::List(items))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Why a parameter's value cannot be turned into text, and where.
#[derive(Debug)]
pub(super) struct ParamError {
    pub(super) at: (u64, u64),
    pub(super) message: String,
}

/// Turns written values into the text kernels receive, given the file's text (for the spans of
/// plain scalars) and the graph's dimensions (for `$DIM`).
pub(super) struct ParamText<'a> {
    pub(super) source: &'a str,
    pub(super) dims: &'a BTreeMap<String, u64>,
    /// The graph file's directory, where `{npy: FILE}` is found.
    pub(super) dir: &'a Path,
}

impl ParamText<'_> {
    /// The text of parameter `name`'s value `value`.
    pub(super) fn text(
        &self,
        name: &str,
        value: &Spanned<ParamFile>,
    ) -> Result<String, ParamError> {
        match &value.value {
            ParamFile::List(items) => {
                let rows = items
                    .iter()
                    .filter(|i| matches!(i.value, ParamFile::List(_)));
                match rows.count() {
                    0 => self.joined(name, items, ", "),
                    n if n == items.len() => {
                        let rows: Result<Vec<String>, ParamError> = items
                            .iter()
                            .map(|row| match &row.value {
                                ParamFile::List(cells) => self.joined(name, cells, ", "),
                                _ => unreachable!("every item is a list"),
                            })
                            .collect();
                        Ok(rows?.join("; "))
                    }
                    _ => Err(self.error(
                        value,
                        format!("parameter {name}: a matrix's rows are lists, each of them"),
                    )),
                }
            }
            ParamFile::Npy(file) => self.npy(name, file, value),
            _ => self.scalar(name, value),
        }
    }

    /// The text of the array in `.npy` file `file`: a scalar, a list or a matrix.
    fn npy(
        &self,
        name: &str,
        file: &str,
        value: &Spanned<ParamFile>,
    ) -> Result<String, ParamError> {
        let path = self.dir.join(file);
        let array = crate::model::npy::read_values(&path, MAX_NPY_VALUES).map_err(|why| {
            self.error(
                value,
                format!("parameter {name}: {}: {why}", path.display()),
            )
        })?;
        let text = |values: &[f64]| {
            values
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match array.shape[..] {
            [] | [_] => Ok(text(&array.values)),
            [_, columns] if columns > 0 => Ok(array
                .values
                .chunks(columns as usize)
                .map(text)
                .collect::<Vec<_>>()
                .join("; ")),
            [_, _] => Ok(String::new()),
            _ => Err(self.error(
                value,
                format!(
                    "parameter {name}: {} holds an array of shape {:?}; a parameter is a \
                     value, a list or a matrix",
                    path.display(),
                    array.shape
                ),
            )),
        }
    }

    /// Scalar `items` joined by `separator`; a list among them is nested too deep.
    fn joined(
        &self,
        name: &str,
        items: &[Spanned<ParamFile>],
        separator: &str,
    ) -> Result<String, ParamError> {
        let texts: Result<Vec<String>, ParamError> =
            items.iter().map(|item| self.scalar(name, item)).collect();
        Ok(texts?.join(separator))
    }

    /// A scalar's text: a string as written, `$DIM` as its value, a number or a boolean as
    /// the file spells it.
    fn scalar(&self, name: &str, value: &Spanned<ParamFile>) -> Result<String, ParamError> {
        match &value.value {
            ParamFile::Text(text) => match text.strip_prefix('$') {
                Some(symbol) => self.dims.get(symbol).map(u64::to_string).ok_or_else(|| {
                    self.error(
                        value,
                        format!("parameter {name} names unknown dimension {symbol}"),
                    )
                }),
                None => Ok(text.clone()),
            },
            ParamFile::Plain => {
                let span = value.referenced.span();
                let (start, len) = (span.offset() as usize, span.len() as usize);
                self.source
                    .get(start..start + len)
                    .map(|t| t.trim().to_string())
                    .ok_or_else(|| self.error(value, format!("parameter {name}: unreadable value")))
            }
            ParamFile::List(_) | ParamFile::Npy(_) => Err(self.error(
                value,
                format!(
                    "parameter {name}: lists nest at most two deep (a list, or a matrix of \
                     rows), and an npy file is a whole value"
                ),
            )),
        }
    }

    fn error(&self, value: &Spanned<ParamFile>, message: String) -> ParamError {
        ParamError {
            at: (value.referenced.line(), value.referenced.column()),
            message,
        }
    }
}
