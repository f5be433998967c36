//! Start-up of the C++ layer: `include/onnx_light.hpp` registers its `std::string` functions and
//! checks that it was generated for this library's layout (declared by that header only).

use crate::bytes::{CxxStringOps, register_cxx_string_ops};

use super::cxx_messages::layout_fingerprint;

/// Registers the C++ layer's string functions and checks that the header was generated for
/// this library's layout (`fingerprint`: FNV-1a of the layout table the header was made from).
/// Returns false on a mismatch: the header then refuses to run (its objects would not be the
/// Rust messages they claim to be).
///
/// # Safety
/// `ops` points at functions that stay valid for the life of the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_init(ops: *const CxxStringOps, fingerprint: u64) -> bool {
    if ops.is_null() || fingerprint != layout_fingerprint() {
        return false;
    }
    // SAFETY: non-NULL, static (contract).
    register_cxx_string_ops(unsafe { &*ops });
    true
}

/// The layout fingerprint of this library (what [`onnxl_cxx_init`] compares).
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_cxx_layout_fingerprint() -> u64 {
    layout_fingerprint()
}
