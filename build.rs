//! Build script: sets the SONAME of the shared library on ELF targets, and `cfg(onnxl_small)` in
//! size-optimized builds.
//!
//! The exported symbols need no help here: for a `cdylib` rustc itself hands the linker a version
//! script that exports the crate graph's C-level symbols (the `#[unsafe(no_mangle)]` `onnxl_*`
//! functions) and makes everything else local, including the C and assembly objects of
//! dependencies. A second anonymous version script would be refused by GNU ld ("anonymous version
//! tag cannot be combined with other version tags"), which links for every target but the host's
//! default (rust-lld); scripts/test.d/10-c-header.sh and 70-cross.sh check that only `onnxl_*` is
//! exported.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // `cfg(onnxl_small)` in a size-optimized build (`opt-level` "s" or "z": the profile
    // `dist-min` of the minimal library): the decoder's string and sub-message readers and the
    // encoder's byte and varint writers, inlined by force into every field's code otherwise,
    // are left to the optimizer there (docs/benchmarks.md, "Library size": ~84 KB less, parse
    // ~13% and serialize ~8% slower).
    if matches!(std::env::var("OPT_LEVEL").as_deref(), Ok("s" | "z")) {
        println!("cargo:rustc-cfg=onnxl_small");
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // GNU ld, gold, lld and mold all accept `-soname` on these targets.
    if matches!(
        os.as_str(),
        "linux"
            | "android"
            | "freebsd"
            | "netbsd"
            | "openbsd"
            | "dragonfly"
            | "solaris"
            | "illumos"
    ) {
        // SONAME as cargo-c sets it: lib<name>.so.<major>, or .so.0.<minor> before 1.0 (the CMake
        // package installs libonnx_light.so.0.1.0 with the .so.0.1 and .so links).
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets the version");
        let soversion = if major == "0" {
            format!("0.{minor}")
        } else {
            major
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libonnx_light.so.{soversion}");
    }
}
