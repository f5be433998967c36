//! `cargo run -p codegen` rewrites every generated file of onnx_light from the schema table;
//! `cargo run -p codegen -- --check` fails when one is stale.

use std::path::Path;

fn main() {
    let check = std::env::args().any(|a| a == "--check");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut stale = Vec::new();
    for (rel, text) in codegen::generate_all() {
        let path = root.join(rel);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            continue;
        }
        if check {
            stale.push(rel);
        } else {
            std::fs::write(&path, text)
                .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            println!("wrote {rel}");
        }
    }
    if !stale.is_empty() {
        eprintln!("stale generated files (run `cargo run -p codegen`): {stale:?}");
        std::process::exit(1);
    }
}
