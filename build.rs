//! Build script: restricts the symbols exported by the shared library to the C ABI (`onnxl_*`)
//! with a linker version script, on targets whose linker takes one.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // GNU ld, gold, lld and mold all accept `--version-script` on these targets.
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
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        let script = out.join("onnx_light.map");
        std::fs::write(
            &script,
            "{\n  global:\n    onnxl_*;\n  local:\n    *;\n};\n",
        )
        .expect("writing the linker version script");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
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
