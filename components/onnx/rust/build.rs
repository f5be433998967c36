//! Links the onnx component's static library (onnx's C++ library built against onnx_light:
//! `cmake -DONNXL_WITH_ONNX=ON`, see components/onnx/CMakeLists.txt) from the directory
//! `ONNX_LIGHT_ONNX_LIB_DIR`, and the C++ runtime it needs. Its calls into onnx_light resolve
//! against the copy of the library the program links, so the program's models are what onnx's
//! code reads.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=ONNX_LIGHT_ONNX_LIB_DIR");
    let Some(dir) = std::env::var_os("ONNX_LIGHT_ONNX_LIB_DIR").map(PathBuf::from) else {
        panic!(
            "onnx_light_onnx links libonnx_light_onnx.a: build it with \
             `cmake -S . -B build -DONNXL_WITH_ONNX=ON && cmake --build build` and set \
             ONNX_LIGHT_ONNX_LIB_DIR to the directory holding it (build/components/onnx)"
        );
    };
    let archive = dir.join("libonnx_light_onnx.a");
    assert!(
        archive.is_file(),
        "ONNX_LIGHT_ONNX_LIB_DIR={} holds no libonnx_light_onnx.a",
        dir.display()
    );
    println!("cargo:rerun-if-changed={}", archive.display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=onnx_light_onnx");
    println!("cargo:rustc-link-lib=dylib=stdc++");
}
