//! `onnx-light roundtrip`: parse files as one message type and serialize them again.

use std::path::PathBuf;

use onnx_light::proto::{
    GraphProto, MapProto, Message, ModelProto, NodeProto, OptionalProto, SequenceProto,
    SparseTensorProto, TensorProto, TypeProto,
};
use onnx_light::{Error, FileLoadMode, ParseOptions, Result, SerializeOptions};

/// Arguments of `roundtrip`.
#[derive(clap::Args)]
pub struct Args {
    /// Message type: ModelProto, TensorProto, SequenceProto, MapProto, OptionalProto, …
    #[arg(long = "type", default_value = "ModelProto")]
    message: String,
    /// Parse with this many threads (negative: all cores).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    threads: i32,
    /// Borrow tensor payloads from the input instead of copying them.
    #[arg(long)]
    no_copy: bool,
    /// How files are read: auto, mmap or buffered.
    #[arg(long, default_value = "auto")]
    load_mode: String,
    /// Directory for the outputs, named 0.pb, 1.pb, … in input order.
    #[arg(long)]
    out_dir: PathBuf,
    /// Input files.
    inputs: Vec<PathBuf>,
}

fn one<M: Message>(args: &Args, opts: &ParseOptions) -> Result<()> {
    for (i, input) in args.inputs.iter().enumerate() {
        let out = args.out_dir.join(format!("{i}.pb"));
        let m: M = onnx_light::parse_from_file(input, opts)?;
        onnx_light::save_to_file(&m, &out, &SerializeOptions::default())?;
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let file_load_mode = match args.load_mode.as_str() {
        "auto" => FileLoadMode::Auto,
        "mmap" => FileLoadMode::Mmap,
        "buffered" => FileLoadMode::Buffered,
        other => return Err(Error::InvalidArgument(format!("unknown load mode {other:?}"))),
    };
    let opts = ParseOptions {
        num_threads: args.threads,
        no_copy: args.no_copy,
        file_load_mode,
        // borrow every payload, however small, so no_copy is exercised fully
        raw_data_threshold: if args.no_copy { 1 } else { 1024 },
        ..Default::default()
    };
    match args.message.as_str() {
        "ModelProto" => one::<ModelProto>(args, &opts),
        "TensorProto" => one::<TensorProto>(args, &opts),
        "SequenceProto" => one::<SequenceProto>(args, &opts),
        "MapProto" => one::<MapProto>(args, &opts),
        "OptionalProto" => one::<OptionalProto>(args, &opts),
        "SparseTensorProto" => one::<SparseTensorProto>(args, &opts),
        "GraphProto" => one::<GraphProto>(args, &opts),
        "NodeProto" => one::<NodeProto>(args, &opts),
        "TypeProto" => one::<TypeProto>(args, &opts),
        other => Err(Error::InvalidArgument(format!("unsupported message type {other:?}"))),
    }
}
