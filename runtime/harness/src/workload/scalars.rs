//! The values of a tensor's elements as numbers: read from their little-endian bytes, written
//! at full scale, and shown in messages, for every numeric element type
//! ([`kplace_abi::Scalar`]). What compares sinks, writes `.npy` files and synthesizes
//! recordings shares it, so every element type behaves the same everywhere.

use kplace_abi::Scalar;

/// The value of one `scalar` in `bytes` (exactly its width), as a double: exact for every
/// type but `f64`, which it is.
pub fn decode(scalar: Scalar, bytes: &[u8]) -> f64 {
    let array = |n: usize| -> [u8; 8] {
        let mut a = [0; 8];
        a[..n].copy_from_slice(&bytes[..n]);
        a
    };
    match scalar {
        Scalar::I8 => f64::from(bytes[0] as i8),
        Scalar::I16 => f64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
        Scalar::I32 => {
            let a = array(4);
            f64::from(i32::from_le_bytes([a[0], a[1], a[2], a[3]]))
        }
        Scalar::F16 => f64::from(half::f16::from_le_bytes([bytes[0], bytes[1]])),
        Scalar::BF16 => f64::from(half::bf16::from_le_bytes([bytes[0], bytes[1]])),
        Scalar::F32 => {
            let a = array(4);
            f64::from(f32::from_le_bytes([a[0], a[1], a[2], a[3]]))
        }
        Scalar::F64 => f64::from_le_bytes(array(8)),
    }
}

/// What 1.0 becomes in `scalar`: the largest positive value of an integer type (so a signal
/// of amplitude up to 1 uses the whole range without clipping), 1 for floats.
pub fn full_scale(scalar: Scalar) -> f64 {
    match scalar {
        Scalar::I8 => f64::from(i8::MAX),
        Scalar::I16 => f64::from(i16::MAX),
        Scalar::I32 => f64::from(i32::MAX),
        Scalar::F16 | Scalar::BF16 | Scalar::F32 | Scalar::F64 => 1.0,
    }
}

/// Appends `value * full_scale(scalar)` as a `scalar`: rounded to the nearest and clamped to
/// the range for integers, rounded to the nearest for floats.
pub fn encode(scalar: Scalar, value: f64, out: &mut Vec<u8>) {
    let v = value * full_scale(scalar);
    let int = |min: f64, max: f64| v.round().clamp(min, max);
    match scalar {
        Scalar::I8 => out.push(int(-128.0, 127.0) as i8 as u8),
        Scalar::I16 => {
            out.extend_from_slice(&(int(-32768.0, 32767.0) as i16).to_le_bytes());
        }
        Scalar::I32 => {
            let (min, max) = (f64::from(i32::MIN), f64::from(i32::MAX));
            out.extend_from_slice(&(int(min, max) as i32).to_le_bytes());
        }
        Scalar::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        Scalar::BF16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        Scalar::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        Scalar::F64 => out.extend_from_slice(&v.to_le_bytes()),
    }
}

/// A value for messages: an integer as itself, a float in scientific notation at its own
/// precision (an `f32` reads `1.1e0`, not its double expansion).
pub fn show(scalar: Scalar, value: f64) -> String {
    match scalar {
        Scalar::I8 | Scalar::I16 | Scalar::I32 => format!("{value}"),
        Scalar::F16 => format!("{:e}", half::f16::from_f64(value)),
        Scalar::BF16 => format!("{:e}", half::bf16::from_f64(value)),
        Scalar::F32 => format!("{:e}", value as f32),
        Scalar::F64 => format!("{value:e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Scalar; 7] = [
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F32,
        Scalar::F64,
    ];

    #[test]
    fn every_scalar_round_trips_at_its_width() {
        for scalar in ALL {
            for value in [0.0, 0.5, -0.25, 1.0, -1.0] {
                let mut bytes = Vec::new();
                encode(scalar, value, &mut bytes);
                assert_eq!(bytes.len() as u64, scalar.bytes(), "{scalar:?}");
                let back = decode(scalar, &bytes) / full_scale(scalar);
                let step = 1.0 / full_scale(scalar);
                assert!((back - value).abs() <= step, "{scalar:?} {value}: {back}");
            }
        }
    }

    #[test]
    fn integers_clamp_and_round_to_the_nearest() {
        let mut b = Vec::new();
        encode(Scalar::I8, 2.0, &mut b);
        encode(Scalar::I8, -2.0, &mut b);
        assert_eq!(b, [127, 128]);
        let mut b = Vec::new();
        encode(Scalar::I16, 1.5 / 32767.0, &mut b);
        assert_eq!(i16::from_le_bytes([b[0], b[1]]), 2);
        assert_eq!(decode(Scalar::I32, &(-7i32).to_le_bytes()), -7.0);
    }

    #[test]
    fn half_precision_is_ieee_binary16() {
        // 1.0 is 0x3C00, -2.0 is 0xC000, 65504 the largest finite value.
        assert_eq!(decode(Scalar::F16, &0x3C00u16.to_le_bytes()), 1.0);
        assert_eq!(decode(Scalar::F16, &0xC000u16.to_le_bytes()), -2.0);
        assert_eq!(decode(Scalar::F16, &0x7BFFu16.to_le_bytes()), 65504.0);
        // bfloat16 is the upper half of a float32: 0x3F80 is 1.0, 0xC040 is -3.0.
        assert_eq!(decode(Scalar::BF16, &0x3F80u16.to_le_bytes()), 1.0);
        assert_eq!(decode(Scalar::BF16, &0xC040u16.to_le_bytes()), -3.0);
        let mut b = Vec::new();
        encode(Scalar::F16, 0.333_333, &mut b);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3555);
    }

    #[test]
    fn values_are_shown_at_their_own_precision() {
        assert_eq!(show(Scalar::I16, -3.0), "-3");
        assert_eq!(show(Scalar::F32, f64::from(1.1f32)), "1.1e0");
        assert_eq!(show(Scalar::F64, 0.1), "1e-1");
    }
}
