//! A kernel's view of its parameters: lists and matrices as the runtime passes them (items
//! joined by ", ", rows by "; "), parsed with errors that name the parameter and the item.

use std::ffi::CString;

use kplace_abi::export::Config;
use kplace_abi::{KernelConfig, Param, SPLIT_NONE};

/// Runs `check` on a config holding `params`.
fn with_params(params: &[(&str, &str)], check: impl FnOnce(&Config<'_>)) {
    let strings: Vec<(CString, CString)> = params
        .iter()
        .map(|(n, v)| (CString::new(*n).unwrap(), CString::new(*v).unwrap()))
        .collect();
    let raw: Vec<Param> = strings
        .iter()
        .map(|(n, v)| Param {
            name: n.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let config = KernelConfig {
        params: raw.as_ptr(),
        inputs: std::ptr::null(),
        outputs: std::ptr::null(),
        n_params: raw.len() as u32,
        n_inputs: 0,
        n_outputs: 0,
        split_axis: SPLIT_NONE,
        tile: 0,
        device_ordinal: 0,
        reserved: 0,
    };
    // SAFETY: every pointer in `config` points into `strings` and `raw`, alive for the call.
    let config = unsafe { Config::from_raw(&config) }.unwrap();
    check(&config);
}

#[test]
fn lists_and_matrices_parse_item_by_item() {
    let params = [
        ("angles", "-30, 0, 14.4775"),
        ("taps", "1, 2.5; -3, 4e-3"),
        ("none", ""),
        ("bad", "1, two, 3"),
        ("ragged", "1, 2; 3"),
    ];
    with_params(&params, |c| {
        assert_eq!(
            c.parse_list::<f64>("angles").unwrap(),
            Some(vec![-30.0, 0.0, 14.4775])
        );
        assert_eq!(
            c.parse_matrix::<f32>("taps").unwrap(),
            Some(vec![vec![1.0, 2.5], vec![-3.0, 4e-3]])
        );
        assert_eq!(c.parse_list::<u32>("none").unwrap(), Some(vec![]));
        assert_eq!(c.parse_list::<u32>("absent").unwrap(), None);
        let e = c.parse_list::<f64>("bad").unwrap_err();
        assert!(
            e.message
                .starts_with("parameter bad: item 1, \"two\", cannot be parsed"),
            "{e}"
        );
        let e = c.parse_matrix::<f64>("ragged").unwrap_err();
        assert_eq!(
            e.message,
            "parameter ragged: row 1 has 1 items, row 0 has 2"
        );
        // A matrix is not a list of numbers.
        assert!(c.parse_list::<f32>("taps").is_err());
    });
}
