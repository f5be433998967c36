//! `onnx-light check MODEL`: the model parses, and every external reference is resolvable under
//! the path rules, lies inside its file, matches its tensor's size, and matches its checksum.

use std::path::PathBuf;

use onnx_light::external::{check_external_data, model_dir};
use onnx_light::{ParseOptions, Result};

/// Arguments of `check`.
#[derive(clap::Args)]
pub struct Args {
    /// Model to check (.onnx).
    model: PathBuf,
    /// Base directory of the weight files (default: the model's directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Do not verify checksums (they read every byte of the weight files).
    #[arg(long)]
    no_checksum: bool,
    /// The passphrase of encrypted weight files.
    #[command(flatten)]
    key: super::crypt::OptionalKeySource,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let opts = ParseOptions {
        load_external_data: false,
        external_data_key: args.key.read()?,
        ..Default::default()
    };
    let model = onnx_light::load_model(&args.model, &opts)?;
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| model_dir(&args.model));
    let mut tensors = 0usize;
    model.visit_tensors(&mut |_| tensors += 1);
    println!(
        "{}: parses ({} tensors, {} nodes in the main graph)",
        args.model.display(),
        tensors,
        model.graph().node.len()
    );
    // Size of the checksum work, for the progress bar.
    let pre = check_external_data(&model, &dir, &opts, false, None);
    let hashed: u64 = pre.files.iter().map(|f| f.size).sum();
    let bar = if args.no_checksum {
        None
    } else {
        super::convert::progress_bar(hashed, "verifying")
    };
    let tick = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let report = check_external_data(&model, &dir, &opts, !args.no_checksum, Some(&tick));
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    println!(
        "external data: {} tensors, {} bytes, {} file(s), {} checksum(s) verified",
        report.tensors,
        report.bytes,
        report.files.len(),
        report.checksums_verified
    );
    for f in &report.files {
        let enc = if f.encrypted { ", encrypted" } else { "" };
        println!("  {} ({} bytes{enc})", f.location, f.size);
    }
    if report.problems.is_empty() {
        println!("OK");
        return Ok(());
    }
    for p in &report.problems {
        println!("problem: {p}");
    }
    println!("{} problem(s)", report.problems.len());
    let mut problems = report.problems;
    Err(problems.remove(0))
}
