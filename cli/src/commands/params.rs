//! `onnx-light params`: parameter dictionaries (the TVM / CVM params format).
//!
//! - `params export MODEL OUT [--names a,b]`: a model's initializers (all, or the named ones in
//!   that order) into a params file;
//! - `params import MODEL PARAMS OUT [--no-add]`: a params file into a model's initializers
//!   (replaced by name, new names added), saved as OUT;
//! - `params list PARAMS`: the arrays of a params file (name, type, shape, bytes).
//!
//! A malformed params file is refused with the check that failed and its byte offset.

use std::path::PathBuf;

use onnx_light::params::{self, ParamsLoadOptions};
use onnx_light::{LoadOptions, Result, SerializeOptions};

/// Arguments of `params`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Write a model's initializers to a params file.
    Export {
        /// Model (.onnx; external data is read relative to its directory).
        model: PathBuf,
        /// Params file to write (atomically).
        out: PathBuf,
        /// Only these initializers, in this order (comma-separated).
        #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
        names: Option<Vec<String>>,
    },
    /// Load a params file into a model's initializers and save the model.
    Import {
        /// Model (.onnx).
        model: PathBuf,
        /// Params file.
        params: PathBuf,
        /// Model to write (inline weights).
        out: PathBuf,
        /// Refuse arrays whose name matches no initializer (default: add them).
        #[arg(long)]
        no_add: bool,
    },
    /// List the arrays of a params file.
    List {
        /// Params file.
        params: PathBuf,
    },
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    match &args.command {
        Command::Export { model, out, names } => {
            let m = onnx_light::load_model(model, &LoadOptions::default())?;
            let names: Option<Vec<&str>> = names
                .as_ref()
                .map(|v| v.iter().map(String::as_str).collect());
            let bytes = params::save_params_file(&m, out, names.as_deref())?;
            let count = match &names {
                Some(n) => n.len(),
                None => m.graph().initializer().len(),
            };
            outln!("wrote {count} arrays ({bytes} bytes) to {}", out.display());
        }
        Command::Import {
            model,
            params: file,
            out,
            no_add,
        } => {
            let mut m = onnx_light::load_model(model, &LoadOptions::default())?;
            let opts = ParamsLoadOptions {
                no_copy: false,
                add_missing: !no_add,
            };
            let report = params::load_params_file_into_model(&mut m, file, &opts)?;
            onnx_light::save_model(&m, out, &SerializeOptions::default())?;
            outln!(
                "{}: {} initializers replaced, {} added; wrote {}",
                file.display(),
                report.replaced,
                report.added,
                out.display()
            );
        }
        Command::List { params: file } => {
            let opts = ParamsLoadOptions {
                no_copy: true,
                ..Default::default()
            };
            let tensors = params::load_params_file(file, &opts)?;
            for t in &tensors {
                let ty =
                    onnx_light::proto::DataType::from_i32(t.data_type()).map_or("?", |d| d.name());
                outln!(
                    "{}\t{ty}\t{:?}\t{} bytes",
                    t.name(),
                    t.dims(),
                    t.raw_data().len()
                );
            }
            outln!("{} arrays", tensors.len());
        }
    }
    Ok(())
}
