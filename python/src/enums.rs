//! `EnumTypeWrapper`: the enum objects of the message classes (`TensorProto.DataType`,
//! `AttributeProto.AttributeType`, ...), as protobuf's Python classes have them.

use pyo3::exceptions::{PyAttributeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// An enum: `Name(value)`, `Value(name)`, `keys()`, `values()`, `items()`, and its values as
/// attributes.
#[pyclass(frozen, module = "onnx_light", name = "EnumTypeWrapper")]
pub struct EnumTypeWrapper {
    name: String,
    values: Vec<(String, i32)>,
}

impl EnumTypeWrapper {
    /// An enum named `name` with `(name, value)` pairs.
    pub fn new(name: &str, values: &[(&str, i32)]) -> Self {
        EnumTypeWrapper {
            name: name.to_string(),
            values: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    /// From owned pairs.
    pub fn from_pairs(name: &str, values: Vec<(String, i32)>) -> Self {
        EnumTypeWrapper {
            name: name.to_string(),
            values,
        }
    }
}

#[pymethods]
impl EnumTypeWrapper {
    /// An enum named `name` (its full name without the package, e.g. `Version`) with
    /// `(name, value)` pairs.
    #[new]
    fn py_new(name: String, values: Vec<(String, i32)>) -> Self {
        Self::from_pairs(&name, values)
    }

    /// The enum's `EnumDescriptor` (see `onnx_light.descriptor`).
    #[getter]
    #[allow(non_snake_case)]
    fn DESCRIPTOR<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("onnx_light.descriptor")?
            .getattr("ENUMS")?
            .get_item(&self.name)
    }

    /// The name of value `v`.
    #[allow(non_snake_case)]
    fn Name(&self, v: i32) -> PyResult<String> {
        self.values
            .iter()
            .find(|(_, x)| *x == v)
            .map(|(k, _)| k.clone())
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "Enum {} has no name defined for value {v}",
                    self.name
                ))
            })
    }

    /// The value named `name`.
    #[allow(non_snake_case)]
    fn Value(&self, name: &str) -> PyResult<i32> {
        self.values
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "Enum {} has no value defined for name '{name}'",
                    self.name
                ))
            })
    }

    /// The names, in declaration order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.values.iter().map(|(k, _)| k.as_str()))
    }

    /// The values, in declaration order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.values.iter().map(|(_, v)| *v))
    }

    /// `(name, value)` pairs, in declaration order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.values.iter().map(|(k, v)| (k.as_str(), *v)))
    }

    fn __getattr__(&self, name: &str) -> PyResult<i32> {
        self.values
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                PyAttributeError::new_err(format!("Enum {} has no value {name}", self.name))
            })
    }

    fn __repr__(&self) -> String {
        format!("<EnumTypeWrapper {}>", self.name)
    }
}
