//! Element-by-element comparison of a sink tensor with its reference, within the tolerance the
//! graph declares for it (`checks:` in the graph file; [`Tolerance`]).
//!
//! Guarantees: real floating-point elements (`f16`, `f32`, `f64`) pass when
//! `|got - want| <= atol + rtol * |want|`, computed in double, complex ones (`cf16`, `cf32`,
//! `cf64`) the same with moduli; NaN never passes; integer elements, record lists and exact
//! tolerances compare bit for bit (a record list its records' bytes, in order, up to its
//! count, then its count and overflow; what a record's fields are is its workload's, so a
//! differing record is shown as its words); every differing element is reported once, with its
//! flat index; comparing buffers that agree allocates nothing.

use kplace_abi::{Dtype, RECORD_BYTES, RecordList};

use super::scalars;

use kplace_core::model::graph::{TensorSpec, Tolerance};

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
    // NaN compares false, so it never passes.
    let within = |diff: f64, w: f64, rtol: f64, atol: f64| diff <= atol + rtol * w.abs();
    let mut differ = 0;
    match (tensor.dtype, tolerance) {
        (Dtype::RECORDS, _) => {
            let (Ok(g), Ok(w)) = (RecordList::parse(got), RecordList::parse(want)) else {
                found(0, "a malformed record list".into(), "a list".into());
                return 1;
            };
            let (gh, wh) = (g.header(), w.header());
            let mut records = g.records().zip(w.records()).enumerate();
            for (i, (a, b)) in &mut records {
                if a != b {
                    differ += 1;
                    found(i as u64, show_record(a), show_record(b));
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
        (dtype, tolerance) => {
            let Some(element) = dtype.element() else {
                found(0, "an element of an unknown dtype".into(), "none".into());
                return 1;
            };
            let (width, part) = (element.bytes() as usize, element.scalar.bytes() as usize);
            // The element's parts as doubles, on the stack.
            let parts = |b: &[u8]| {
                let mut v = [0.0; 2];
                for (k, value) in v.iter_mut().take(element.parts()).enumerate() {
                    *value = scalars::decode(element.scalar, &b[k * part..(k + 1) * part]);
                }
                v
            };
            let show = |b: &[u8]| {
                let [re, im] = parts(b);
                let s = |v| scalars::show(element.scalar, v);
                if element.complex {
                    format!("({}, {})", s(re), s(im))
                } else {
                    s(re)
                }
            };
            for (index, (g, w)) in got
                .chunks_exact(width)
                .zip(want.chunks_exact(width))
                .enumerate()
            {
                let agrees = match tolerance {
                    Tolerance::Close { rtol, atol } if element.scalar.is_float() => {
                        let ([gr, gi], [wr, wi]) = (parts(g), parts(w));
                        within((gr - wr).hypot(gi - wi), wr.hypot(wi), rtol, atol)
                    }
                    // Bit for bit.
                    _ => g == w,
                };
                if !agrees {
                    differ += 1;
                    found(index as u64, show(g), show(w));
                }
            }
        }
    }
    differ
}

/// A record as its 32-bit words in hexadecimal, in the machine's byte order (`[00000001
/// 00000002 40400000]`): the runtime does not know what the words mean.
fn show_record(record: &[u8; RECORD_BYTES]) -> String {
    let words: Vec<String> = record
        .as_chunks::<4>()
        .0
        .iter()
        .map(|w| format!("{:08x}", u32::from_ne_bytes(*w)))
        .collect();
    format!("[{}]", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplace_core::model::graph::Producer;

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
    fn every_numeric_dtype_compares_by_its_values() {
        let close = Tolerance::Close {
            rtol: 1e-3,
            atol: 0.0,
        };
        // Integers: exact, shown as integers, complex ones as pairs.
        let t = tensor(Dtype::I8, &[3]);
        let d = diffs(&t, Tolerance::Exact, &[1, 0xFE, 3], &[1, 0xFF, 3]);
        assert_eq!(d, [(1, "-2".into(), "-1".into())]);
        let t = tensor(Dtype::CI8, &[2]);
        let d = diffs(&t, Tolerance::Exact, &[1, 2, 3, 4], &[1, 2, 3, 5]);
        assert_eq!(d, [(1, "(3, 4)".into(), "(3, 5)".into())]);
        let t = tensor(Dtype::I32, &[1]);
        let d = diffs(&t, Tolerance::Exact, &(-70000i32).to_le_bytes(), &[0; 4]);
        assert_eq!(d, [(0, "-70000".into(), "0".into())]);
        // Doubles: within the tolerance, in double.
        let t = tensor(Dtype::F64, &[2]);
        let f64s = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let want = f64s(&[1.0, 1e300]);
        assert!(diffs(&t, close, &f64s(&[1.0009, 1.0005e300]), &want).is_empty());
        let d = diffs(&t, close, &f64s(&[1.01, 1e300]), &want);
        assert_eq!(d, [(0, "1.01e0".into(), "1e0".into())]);
        let t = tensor(Dtype::CF64, &[1]);
        let want = f64s(&[3.0, 4.0]);
        assert!(diffs(&t, close, &f64s(&[3.002, 3.997]), &want).is_empty());
        assert_eq!(diffs(&t, close, &f64s(&[3.0, 4.1]), &want).len(), 1);
        // Halves: 1.0 is 0x3C00, 1.0009765625 (one step above) 0x3C01, -2.0 0xC000.
        let halves = |v: &[u16]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let t = tensor(Dtype::F16, &[2]);
        let want = halves(&[0x3C00, 0xC000]);
        let tol = Tolerance::Close {
            rtol: 5e-4,
            atol: 0.0,
        };
        let d = diffs(&t, tol, &halves(&[0x3C01, 0xC000]), &want);
        assert_eq!(d, [(0, "1.0009766e0".into(), "1e0".into())]);
        let t = tensor(Dtype::CF16, &[1]);
        assert!(diffs(&t, tol, &halves(&[0x3C00, 0xC000]), &want).is_empty());
        // NaN (0x7E00) never passes.
        assert_eq!(diffs(&t, tol, &halves(&[0x7E00, 0xC000]), &want).len(), 1);
    }

    #[test]
    fn record_lists_compare_records_and_counts() {
        let t = tensor(Dtype::RECORDS, &[4]);
        let list = |records: &[(u32, u32, f32)], overflow: u32| {
            let mut b = vec![0u8; t.bytes as usize];
            let header = [records.len() as u32, 4, overflow, 0];
            for (i, w) in header.iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            for (k, (r, d, p)) in records.iter().enumerate() {
                let at = 16 + 12 * k;
                b[at..at + 4].copy_from_slice(&r.to_ne_bytes());
                b[at + 4..at + 8].copy_from_slice(&d.to_ne_bytes());
                b[at + 8..at + 12].copy_from_slice(&p.to_ne_bytes());
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
        assert_eq!(
            d,
            [(
                1,
                "[00000004 00000006 40c00000]".into(),
                "[00000004 00000005 40c00000]".into()
            )]
        );
        // Records compare as bytes: a record's power of -0.0 differs from 0.0.
        let zero = list(&[(1, 2, 0.0)], 0);
        assert_eq!(
            diffs(&t, Tolerance::Exact, &list(&[(1, 2, -0.0)], 0), &zero).len(),
            1
        );
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
