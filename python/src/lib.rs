//! The native module `onnx_light._native` of the Python package `onnx_light`: message classes
//! that are views into Rust messages, containers of repeated fields, and the load/save
//! functions of the library, run without the GIL. See docs/python.md.

mod api;
mod arrays;
mod bytes_io;
mod containers;
mod enums;
mod errors;
mod foreign;
#[rustfmt::skip]
#[allow(clippy::all, unused_unsafe, unused_variables)]
mod generated;
mod gil;
mod message;
#[cfg(feature = "onnx")]
mod onnx_cxx;
mod ops;
mod root;
mod schema;
mod text;
mod tools;
mod view;

use pyo3::prelude::*;

/// Parsing makes many small allocations: mimalloc is faster at them than glibc's malloc (Python
/// objects still come from Python's allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The project's one version (the top-level Cargo.toml's [workspace.package]).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<view::Message>()?;
    m.add_class::<containers::RepeatedScalarContainer>()?;
    m.add_class::<containers::RepeatedCompositeContainer>()?;
    m.add_class::<enums::EnumTypeWrapper>()?;
    m.add_class::<message::FieldDescriptor>()?;
    generated::register(m)?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(api::load_path, m)?)?;
    m.add_function(wrap_pyfunction!(api::load_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(api::save_path, m)?)?;
    m.add_function(wrap_pyfunction!(api::serialize, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::tensor_raw_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::tensor_field_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::tensor_external_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::tensor_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(tools::load_external_data_for_model, m)?)?;
    m.add_function(wrap_pyfunction!(tools::check_external_data, m)?)?;
    m.add_function(wrap_pyfunction!(tools::populate_external_data, m)?)?;
    m.add_function(wrap_pyfunction!(tools::clear_external_data, m)?)?;
    m.add_function(wrap_pyfunction!(tools::has_marked_external_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(tools::adopt_external_references, m)?)?;
    m.add_function(wrap_pyfunction!(
        tools::convert_model_from_external_data,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(tools::consolidate_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(tools::encrypt_file, m)?)?;
    m.add_function(wrap_pyfunction!(tools::decrypt_file, m)?)?;
    m.add_function(wrap_pyfunction!(tools::load_params, m)?)?;
    m.add_function(wrap_pyfunction!(tools::save_params, m)?)?;
    m.add_function(wrap_pyfunction!(tools::load_with_prepacked, m)?)?;
    m.add_function(wrap_pyfunction!(tools::split_large_payloads, m)?)?;
    m.add_function(wrap_pyfunction!(tools::memory_reuse_limit, m)?)?;
    m.add_function(wrap_pyfunction!(tools::set_memory_reuse_limit, m)?)?;
    m.add_function(wrap_pyfunction!(tools::memory_held_for_reuse, m)?)?;
    m.add_function(wrap_pyfunction!(tools::release_memory_held_for_reuse, m)?)?;
    m.add_function(wrap_pyfunction!(schema::schema_table, m)?)?;
    add_data_types(m)?;
    // onnx's C++ library (checker, shape inference, version converter, schemas): linked in by
    // the `onnx` feature.
    m.add("HAS_ONNX_CXX", cfg!(feature = "onnx"))?;
    #[cfg(feature = "onnx")]
    onnx_cxx::register(m)?;
    Ok(())
}

/// `TensorProto.DataType` (an open enum of the library: `data_type` is a plain int32 field) and
/// its values as attributes of `TensorProto` (`TensorProto.FLOAT`).
fn add_data_types(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let tp = m.py().get_type::<generated::PyTensorProto>();
    let pairs: Vec<(String, i32)> = (0..)
        .map_while(|i| onnx_light::proto::DataType::from_i32(i).map(|d| (d.name().to_string(), i)))
        .collect();
    for (k, v) in &pairs {
        tp.setattr(k.as_str(), *v)?;
    }
    tp.setattr(
        "DataType",
        enums::EnumTypeWrapper::from_pairs("TensorProto.DataType", pairs),
    )?;
    Ok(())
}
