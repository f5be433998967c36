//! Command-line interface: argument parsing and dispatch to the subcommands.

mod check;
mod convert;
mod crypt;
mod info;
mod params;
mod prepack;
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
    /// Re-save a model with its weights in external files (aligned, split, checksummed,
    /// encrypted) or inline; --encrypt writes a fully encrypted model directory in one step.
    Convert(convert::Args),
    /// Check a model: it parses, and every external reference resolves safely, lies in its
    /// file and matches its checksum.
    Check(check::Args),
    /// Encrypt a model (or any file) with a passphrase from --key-file or --key-env.
    Encrypt(crypt::EncryptArgs),
    /// Decrypt an encrypted model or file (ONNXCRY1/2/3 or the chunked format).
    Decrypt(crypt::DecryptArgs),
    /// Parameter dictionaries (TVM/CVM params files): export a model's initializers, import a
    /// params file into a model, list a params file.
    Params(params::Args),
    /// ONNX Runtime pre-packed blobs of initializers: list, attach (saving with external data),
    /// extract.
    Prepack(prepack::Args),
}

/// Runs the tool; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { model, threads } => info::run(model.as_deref(), threads),
        Command::Roundtrip(args) => roundtrip::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Encrypt(args) => crypt::encrypt(&args),
        Command::Decrypt(args) => crypt::decrypt(&args),
        Command::Params(args) => params::run(&args),
        Command::Prepack(args) => prepack::run(&args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("onnx-light: {e}");
            1
        }
    }
}
