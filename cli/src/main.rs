//! `onnx-light`: the command-line tool (a thin layer over the library).

mod commands;

/// The tool allocates millions of small objects on metadata-heavy models: mimalloc is faster at
/// that than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(commands::run());
}
