//! Rows of kplace's JSON results (a report's stages, a search's trials) turned into columns,
//! the form `pandas.DataFrame` takes as it is: no glue to write, and pandas stays optional.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// `rows` (a list of dicts) as columns: `{"name": [...], "device": [...], ...}`, a column
/// per scalar field any row has (`None` where a row lacks it).
pub fn columns<'py>(py: Python<'py>, rows: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for row in rows.iter() {
        for (key, value) in row.cast::<PyDict>()?.iter() {
            let scalar = !value.is_instance_of::<PyDict>() && !value.is_instance_of::<PyList>();
            if scalar && !out.contains(&key)? {
                out.set_item(&key, PyList::empty(py))?;
            }
        }
    }
    for (key, column) in out.iter() {
        let column = column.cast::<PyList>()?;
        for row in rows.iter() {
            match row.cast::<PyDict>()?.get_item(&key)? {
                Some(value) => column.append(value)?,
                None => column.append(py.None())?,
            }
        }
    }
    Ok(out)
}

/// `columns` as a pandas DataFrame (pandas must be installed: it is not a dependency of
/// kplace).
pub fn data_frame<'py>(
    py: Python<'py>,
    columns: Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    py.import("pandas")?.getattr("DataFrame")?.call1((columns,))
}
