//! Element-by-element comparison of a sink tensor with its reference, within the tolerance the
//! graph declares for it (`checks:` in the graph file; [`Tolerance`]).
//!
//! Guarantees: `f32` elements pass when `|got - want| <= atol + rtol * |want|`, `cf32` elements
//! the same with moduli; NaN never passes; `ci16`, detection lists and exact tolerances compare
//! bit for bit (a detection list its records up to its count, then its count and overflow);
//! every differing element is reported once, with its flat index; comparing buffers that
//! agree allocates nothing.

use kplace_abi::{DetectionList, Dtype};

use crate::model::graph::{TensorSpec, Tolerance};

/// Compares `got` with `want`, two buffers of `tensor`, within `tolerance`; calls `found` with
/// each differing element's flat index and both values as text, and returns how many differ.
/// Allocates nothing when they agree.
pub fn compare(
    tensor: &TensorSpec,
    tolerance: Tolerance,
    got: &[u8],
    want: &[u8],
    found: &mut dyn FnMut(u64, String, String),
) -> u64 {
    let word = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let float = |b: &[u8], i: usize| f32::from_bits(word(b, i));
    // NaN compares false, so it never passes.
    let within = |diff: f64, w: f64, rtol: f64, atol: f64| diff <= atol + rtol * w.abs();
    let mut differ = 0;
    match (tensor.dtype, tolerance) {
        (Dtype::DETECTIONS, _) => {
            let (Ok(g), Ok(w)) = (DetectionList::parse(got), DetectionList::parse(want)) else {
                found(0, "a malformed detection list".into(), "a list".into());
                return 1;
            };
            let (gh, wh) = (g.header(), w.header());
            let mut records = g.records().zip(w.records()).enumerate();
            for (i, (a, b)) in &mut records {
                if a != b {
                    differ += 1;
                    found(i as u64, format!("{a:?}"), format!("{b:?}"));
                }
            }
            if gh.count != wh.count || gh.overflow != wh.overflow {
                differ += 1;
                found(
                    u64::from(gh.count.min(wh.count)),
                    format!("{} records, {} overflowed", gh.count, gh.overflow),
                    format!("{} records, {} overflowed", wh.count, wh.overflow),
                );
            }
        }
        (Dtype::F32, Tolerance::Close { rtol, atol }) => {
            for i in (0..got.len()).step_by(4) {
                let (g, w) = (float(got, i), float(want, i));
                let diff = (f64::from(g) - f64::from(w)).abs();
                if !within(diff, f64::from(w), rtol, atol) {
                    differ += 1;
                    found((i / 4) as u64, format!("{g:e}"), format!("{w:e}"));
                }
            }
        }
        (Dtype::CF32, Tolerance::Close { rtol, atol }) => {
            for i in (0..got.len()).step_by(8) {
                let (gr, gi) = (float(got, i), float(got, i + 4));
                let (wr, wi) = (float(want, i), float(want, i + 4));
                let diff = f64::from(gr - wr).hypot(f64::from(gi - wi));
                let w = f64::from(wr).hypot(f64::from(wi));
                if !within(diff, w, rtol, atol) {
                    differ += 1;
                    found(
                        (i / 8) as u64,
                        format!("({gr:e}, {gi:e})"),
                        format!("({wr:e}, {wi:e})"),
                    );
                }
            }
        }
        // Bit for bit, element by element.
        (dtype, _) => {
            let width = if dtype == Dtype::CF32 { 8 } else { 4 };
            for i in (0..got.len()).step_by(width) {
                if got[i..i + width] != want[i..i + width] {
                    differ += 1;
                    let show = |b: &[u8]| match dtype {
                        Dtype::CI16 => format!(
                            "({}, {})",
                            i16::from_le_bytes([b[i], b[i + 1]]),
                            i16::from_le_bytes([b[i + 2], b[i + 3]])
                        ),
                        Dtype::CF32 => format!("({:e}, {:e})", float(b, i), float(b, i + 4)),
                        _ => format!("{:e}", float(b, i)),
                    };
                    found((i / width) as u64, show(got), show(want));
                }
            }
        }
    }
    differ
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Producer;

    fn tensor(dtype: Dtype, shape: &[u64]) -> TensorSpec {
        TensorSpec {
            name: "t".into(),
            dtype,
            shape: shape.to_vec(),
            bytes: dtype.bytes_for(shape).unwrap(),
            producer: Producer::Source,
        }
    }

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn diffs(
        t: &TensorSpec,
        tol: Tolerance,
        got: &[u8],
        want: &[u8],
    ) -> Vec<(u64, String, String)> {
        let mut out = Vec::new();
        let n = compare(t, tol, got, want, &mut |i, g, w| out.push((i, g, w)));
        assert_eq!(n as usize, out.len());
        out
    }

    #[test]
    fn floats_pass_within_their_tolerance_and_fail_outside_it_with_the_index() {
        let t = tensor(Dtype::F32, &[4]);
        let tol = Tolerance::Close {
            rtol: 1e-3,
            atol: 1e-6,
        };
        let want = floats(&[1.0, -2.0, 0.0, 100.0]);
        assert!(diffs(&t, tol, &floats(&[1.0009, -2.001, 1e-7, 100.09]), &want).is_empty());
        let d = diffs(&t, tol, &floats(&[1.0, -2.0, 1e-5, 100.2]), &want);
        assert_eq!(d.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 3]);
        let d = diffs(&t, tol, &floats(&[f32::NAN, -2.0, 0.0, 100.0]), &want);
        assert_eq!(d[0].0, 0);
        // Exact is bit for bit.
        let d = diffs(
            &t,
            Tolerance::Exact,
            &floats(&[1.0, -2.0, -0.0, 100.0]),
            &want,
        );
        assert_eq!(d[0].0, 2);
    }

    #[test]
    fn complex_elements_compare_by_modulus_and_integers_exactly() {
        let t = tensor(Dtype::CF32, &[2]);
        let tol = Tolerance::Close {
            rtol: 1e-3,
            atol: 0.0,
        };
        let want = floats(&[3.0, 4.0, 1.0, 0.0]);
        assert!(diffs(&t, tol, &floats(&[3.003, 3.996, 1.0, 0.0]), &want).is_empty());
        let d = diffs(&t, tol, &floats(&[3.0, 4.0, 1.0, 0.01]), &want);
        assert_eq!((d.len(), d[0].0), (1, 1));
        let t = tensor(Dtype::CI16, &[3]);
        let want: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut got = want.clone();
        got[8] ^= 1;
        let d = diffs(&t, Tolerance::Exact, &got, &want);
        assert_eq!(d, [(2, "(4, 6)".into(), "(5, 6)".into())]);
    }

    #[test]
    fn detection_lists_compare_records_and_counts() {
        let t = tensor(Dtype::DETECTIONS, &[4]);
        let list = |records: &[(u32, u32, f32)], overflow: u32| {
            let mut b = vec![0u8; t.bytes as usize];
            let header = [records.len() as u32, 4, overflow, 0];
            for (i, w) in header.iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            for (k, (r, d, p)) in records.iter().enumerate() {
                let at = 16 + 12 * k;
                b[at..at + 4].copy_from_slice(&r.to_le_bytes());
                b[at + 4..at + 8].copy_from_slice(&d.to_le_bytes());
                b[at + 8..at + 12].copy_from_slice(&p.to_le_bytes());
            }
            b
        };
        let want = list(&[(1, 2, 3.0), (4, 5, 6.0)], 0);
        assert!(diffs(&t, Tolerance::Exact, &want, &want).is_empty());
        let d = diffs(
            &t,
            Tolerance::Exact,
            &list(&[(1, 2, 3.0), (4, 6, 6.0)], 0),
            &want,
        );
        assert_eq!(d[0].0, 1);
        let d = diffs(&t, Tolerance::Exact, &list(&[(1, 2, 3.0)], 0), &want);
        assert_eq!(
            d[0],
            (
                1,
                "1 records, 0 overflowed".into(),
                "2 records, 0 overflowed".into()
            )
        );
    }
}
