//! The allowlist a stored value passes before LangGraph's loader is given its bytes
//! (`lazarus_session::host_blob`, the rule `lazarus sessions show` and the web view read
//! values by): nothing outside it is imported, constructed or called.

use lazarus_session::host_blob::{self, Allowlist};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::UnsafeValueError;

/// LangGraph's safe types and a program's own additions.
#[pyclass(module = "lazarus._native", frozen)]
pub(crate) struct NativeAllowlist {
    allow: Allowlist,
}

#[pymethods]
impl NativeAllowlist {
    /// `extra`: (module, name) pairs allowed besides LangGraph's safe types.
    #[new]
    #[pyo3(signature = (extra=Vec::new()))]
    fn new(extra: Vec<(String, String)>) -> Self {
        NativeAllowlist {
            allow: Allowlist::with(extra),
        }
    }

    /// The bytes of a stored value (`type_tag` and base64 as a record holds them) once every
    /// type it constructs and method it calls is allowed; else `UnsafeValueError` saying which.
    fn checked<'py>(
        &self,
        py: Python<'py>,
        type_tag: &str,
        b64: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py
            .detach(|| {
                let bytes = host_blob::decode_b64(b64)?;
                host_blob::check(type_tag, &bytes, &self.allow)?;
                Ok::<_, host_blob::BlobError>(bytes)
            })
            .map_err(|e| UnsafeValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// LangGraph's safe types, as (module, name) pairs.
    #[staticmethod]
    fn safe_types() -> Vec<(&'static str, &'static str)> {
        host_blob::SAFE_TYPES.to_vec()
    }
}
