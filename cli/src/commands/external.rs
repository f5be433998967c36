//! `onnx-light external-data`: external data converted in memory, as a program would with the
//! library (`convert_model_to_external_data`, `populate_external_data`, `clear_external_data`):
//! the input is loaded without its external data, converted, and written whole (inline) to the
//! output, so the result shows what the conversion did to every tensor.

use std::path::PathBuf;

use onnx_light::external::{
    ConvertExternalOptions, clear_external_data, convert_model_to_external_data,
    populate_external_data,
};
use onnx_light::{LoadOptions, Result, SerializeOptions};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Mark the tensors a save would move to weight files as external (location, offset,
    /// length), keeping their bytes; nothing but OUTPUT is written.
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// The weight file (default model.onnx.data).
        #[arg(long, value_name = "LOC")]
        location: Option<String>,
        /// Tensors with at least this many bytes are converted.
        #[arg(long, default_value_t = 1024, value_name = "N")]
        size_threshold: u64,
        /// One weight file per tensor, named after the tensor.
        #[arg(long)]
        per_tensor_files: bool,
        /// Also convert tensors of node attributes.
        #[arg(long)]
        convert_attribute: bool,
        /// Then drop the bytes of the external tensors (the .onnx a save writes).
        #[arg(long)]
        clear: bool,
    },
    /// Read the bytes of the external tensors in, keeping their references.
    Populate {
        input: PathBuf,
        output: PathBuf,
        /// Directory of the weight files (default: INPUT's directory).
        #[arg(long, value_name = "DIR")]
        base_dir: Option<PathBuf>,
    },
    /// Drop the bytes of the external tensors, keeping their references.
    Clear { input: PathBuf, output: PathBuf },
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let lazy = LoadOptions {
        load_external_data: false,
        ..Default::default()
    };
    let (output, model, what) = match &args.action {
        Action::Convert {
            input,
            output,
            location,
            size_threshold,
            per_tensor_files,
            convert_attribute,
            clear,
        } => {
            let mut m = onnx_light::load_model(input, &lazy)?;
            let opts = ConvertExternalOptions {
                all_tensors_to_one_file: !per_tensor_files,
                location: location.clone(),
                size_threshold: *size_threshold,
                convert_attribute: *convert_attribute,
            };
            let report = convert_model_to_external_data(&mut m, &opts)?;
            if *clear {
                clear_external_data(&mut m);
            }
            let what = format!(
                "{} tensors converted into {} weight file(s)",
                report.external_tensors,
                report.files.len()
            );
            (output, m, what)
        }
        Action::Populate {
            input,
            output,
            base_dir,
        } => {
            let mut m = onnx_light::load_model(input, &lazy)?;
            let dir = match base_dir {
                Some(d) => d.clone(),
                None => onnx_light::external::model_dir(input),
            };
            let n = populate_external_data(&mut m, &dir, &LoadOptions::default())?;
            (output, m, format!("{n} tensors populated"))
        }
        Action::Clear { input, output } => {
            let mut m = onnx_light::load_model(input, &lazy)?;
            let n = clear_external_data(&mut m);
            (output, m, format!("{n} tensors cleared"))
        }
    };
    onnx_light::save_model(&model, output, &SerializeOptions::default())?;
    errln!("wrote {}: {what}", output.display());
    Ok(())
}
