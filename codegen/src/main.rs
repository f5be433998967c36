//! `cargo run -p codegen` rewrites every generated file of onnx_light: the code generator's
//! outputs from the schema table, then the C header `include/onnx_light.h`, which the pinned
//! cbindgen writes from `src/ffi/` (some of it generated just before). `cargo run -p codegen --
//! --check` fails when one is stale (the test command runs it).

use std::path::Path;

fn main() {
    let check = std::env::args().any(|a| a == "--check");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut stale = Vec::new();
    let mut update = |rel: &'static str, text: String| {
        let path = root.join(rel);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            return;
        }
        if check {
            stale.push(rel);
        } else {
            std::fs::write(&path, text)
                .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            println!("wrote {rel}");
        }
    };
    for (rel, text) in codegen::generate_all() {
        update(rel, text);
    }
    update("include/onnx_light.h", c_header(&root));
    if !stale.is_empty() {
        eprintln!("stale generated files (run `cargo run -p codegen`): {stale:?}");
        std::process::exit(1);
    }
}

/// The C header as the pinned cbindgen writes it from `src/ffi/` (configured by cbindgen.toml).
fn c_header(root: &Path) -> String {
    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("reading cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi/mod.rs"))
        .generate()
        .expect("cbindgen failed on src/ffi/");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}
