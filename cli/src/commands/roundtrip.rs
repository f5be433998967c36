//! `onnx-light roundtrip`: parse files as one message type and serialize them again.

use std::path::PathBuf;

use onnx_light::proto::{Message, MessageVisitor, visit_message_type};
use onnx_light::{Error, FileLoadMode, LoadOptions, ParseOptions, Result, SerializeOptions};

/// Arguments of `roundtrip`.
#[derive(clap::Args)]
pub struct Args {
    /// Message type: ModelProto, TensorProto, SequenceProto, MapProto, OptionalProto, …
    #[arg(long = "type", default_value = "ModelProto")]
    message: String,
    /// Parse with this many threads (negative: all cores).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::commands::thread_count)]
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
    /// Record a failure as `N.err` (the error message) and go on with the next input.
    #[arg(long)]
    keep_going: bool,
    /// Input files.
    inputs: Vec<PathBuf>,
}

fn one<M: Message>(args: &Args, opts: &LoadOptions) -> Result<()> {
    for (i, input) in args.inputs.iter().enumerate() {
        let out = args.out_dir.join(format!("{i}.pb"));
        let result = onnx_light::parse_from_file::<M>(input, opts)
            .and_then(|m| onnx_light::save_to_file(&m, &out, &SerializeOptions::default()));
        match result {
            Ok(()) => {}
            Err(e) if args.keep_going => {
                let err = args.out_dir.join(format!("{i}.err"));
                std::fs::write(&err, e.to_string()).map_err(|e| Error::io(&err, e))?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let file_load_mode = match args.load_mode.as_str() {
        "auto" => FileLoadMode::Auto,
        "mmap" => FileLoadMode::Mmap,
        "buffered" => FileLoadMode::Buffered,
        other => {
            return Err(Error::InvalidArgument(format!(
                "unknown load mode {other:?}"
            )));
        }
    };
    let parse = ParseOptions {
        num_threads: args.threads,
        // exercise the parallel path whenever threads are asked for
        min_parallel_block_size: 0,
        no_copy: args.no_copy,
        file_load_mode,
        // borrow every payload, however small, so no_copy is exercised fully
        raw_data_threshold: if args.no_copy { 1 } else { 1024 },
        ..Default::default()
    };
    let opts = LoadOptions {
        // byte-exact round trips: external references stay as they are
        load_external_data: false,
        ..parse.into()
    };
    struct Visit<'a>(&'a Args, &'a LoadOptions);
    impl MessageVisitor for Visit<'_> {
        type Output = Result<()>;
        fn visit<M: Message>(self) -> Result<()> {
            one::<M>(self.0, self.1)
        }
    }
    visit_message_type(&args.message, Visit(args, &opts)).unwrap_or_else(|| {
        Err(Error::InvalidArgument(format!(
            "unknown message type {:?}",
            args.message
        )))
    })
}
