//! Command-line interface: argument parsing and dispatch to the subcommands.

mod info;
mod roundtrip;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Load, inspect and save ONNX models without libprotobuf.
#[derive(Parser)]
#[command(name = "onnx-light", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Summarize a model (the bundled sample model when MODEL is omitted).
    Info {
        /// Path of an .onnx file.
        model: Option<PathBuf>,
        /// Parse with this many threads (negative: all cores).
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        threads: i32,
    },
    /// Parse files as a message type and write them back (compatibility testing).
    Roundtrip(roundtrip::Args),
}

/// Runs the tool; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { model, threads } => info::run(model.as_deref(), threads),
        Command::Roundtrip(args) => roundtrip::run(&args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("onnx-light: {e}");
            1
        }
    }
}
