//! `.npy` files as NumPy writes them (version 1.0), for tests that need one: constant tensors,
//! parameters read from a file, golden files.

/// The bytes of an `.npy` file of `descr` (`<f4`, `<c8`, ...) and `shape` (a Python tuple,
/// `(3,)`) around `data`, the header padded to a multiple of 64 bytes as NumPy pads it.
pub fn bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((dict.len() as u16).to_le_bytes());
    bytes.extend(dict.as_bytes());
    bytes.extend(data);
    bytes
}
