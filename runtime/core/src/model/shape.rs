//! A frame's shape as people write it: the source tensor's extents, innermost axis first
//! (`1024x128` for a source of shape `[128, 1024]`), as `--shape` takes it and tables print it.
//! [`Graph::bind_source_shape`](super::graph::Graph::bind_source_shape) turns one into the
//! dimensions it binds in a graph.
//!
//! Guarantees: a parsed shape has at least one extent and none is zero.

use std::fmt;
use std::str::FromStr;

/// A frame's extents, innermost axis first.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameShape(Vec<u64>);

impl FrameShape {
    /// The shape of extents `innermost_first`; `None` when there are none or one is zero.
    pub fn new(innermost_first: Vec<u64>) -> Option<FrameShape> {
        (!innermost_first.is_empty() && !innermost_first.contains(&0))
            .then_some(FrameShape(innermost_first))
    }

    /// One element: what a frame of no axes holds.
    pub fn one() -> FrameShape {
        FrameShape(vec![1])
    }

    /// The shape of a tensor of shape `outermost_first` (a graph's order).
    pub fn of_tensor(outermost_first: &[u64]) -> Option<FrameShape> {
        FrameShape::new(outermost_first.iter().rev().copied().collect())
    }

    /// The extents, innermost axis first.
    pub fn extents(&self) -> &[u64] {
        &self.0
    }

    /// Elements in a frame (saturating).
    pub fn elements(&self) -> u64 {
        self.0.iter().fold(1u64, |n, &e| n.saturating_mul(e))
    }
}

impl fmt::Display for FrameShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, extent) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("x")?;
            }
            write!(f, "{extent}")?;
        }
        Ok(())
    }
}

/// A frame shape's text that is not one: a part that is not a positive integer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid shape {text:?}: {part:?} is not a positive integer (expected e.g. 1024x128)")]
pub struct ShapeTextError {
    /// The text given.
    pub text: String,
    /// Its first part that is not a positive integer.
    pub part: String,
}

impl FromStr for FrameShape {
    type Err = ShapeTextError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let extents = text
            .split('x')
            .map(|part| match part.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(ShapeTextError {
                    text: text.to_string(),
                    part: part.to_string(),
                }),
            })
            .collect::<Result<Vec<u64>, ShapeTextError>>()?;
        Ok(FrameShape(extents))
    }
}

/// A shape is written as text (`1024x128`) in reports and sweep files.
impl serde::Serialize for FrameShape {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FrameShape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_reads_and_prints_innermost_first() {
        let shape: FrameShape = "1024x128".parse().unwrap();
        assert_eq!(shape.extents(), [1024, 128]);
        assert_eq!(shape.to_string(), "1024x128");
        assert_eq!(shape.elements(), 131072);
        assert_eq!(FrameShape::of_tensor(&[128, 1024]), Some(shape));
        assert_eq!("7".parse::<FrameShape>().unwrap().extents(), [7]);
    }

    #[test]
    fn zero_empty_or_non_numeric_extents_are_refused_naming_the_part() {
        for (text, part) in [("1024x0", "\"0\""), ("x128", "\"\""), ("1024xM", "\"M\"")] {
            let e = text.parse::<FrameShape>().unwrap_err().to_string();
            assert!(
                e.contains(part) && e.contains("expected e.g. 1024x128"),
                "{e}"
            );
        }
        assert_eq!(FrameShape::new(vec![]), None);
        assert_eq!(FrameShape::new(vec![3, 0]), None);
    }

    #[test]
    fn a_shape_is_text_in_json_and_bad_text_is_refused() {
        let shape: FrameShape = "256x16x2".parse().unwrap();
        let json = serde_json::to_string(&shape).unwrap();
        assert_eq!(json, "\"256x16x2\"");
        assert_eq!(serde_json::from_str::<FrameShape>(&json).unwrap(), shape);
        let e = serde_json::from_str::<FrameShape>("\"256x0\"").unwrap_err();
        assert!(
            e.to_string().contains("\"0\" is not a positive integer"),
            "{e}"
        );
    }
}
