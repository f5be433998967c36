//! `onnx-light prepack`: ONNX Runtime pre-packed blobs of a model's initializers — list them,
//! attach blobs from files (saving the model with external data), extract one.

use std::path::PathBuf;

use clap::Subcommand;
use onnx_light::{Error, LoadOptions, ParseOptions, PrepackedBlobs, Result, SaveExternalOptions};

/// Arguments of `prepack`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the pre-packed blobs of every initializer (key, buffers, offsets in the weight file,
    /// sizes, checksum fields).
    List {
        /// The model (.onnx; its weight files beside it).
        model: PathBuf,
    },
    /// Attach blobs read from files to initializers and save the model with external data: each
    /// blob lands right after its initializer's bytes, recorded as ONNX Runtime does
    /// (`prepacked_N` entries). Blobs already in the input are kept unless replaced.
    Attach {
        /// Input model.
        input: PathBuf,
        /// Output model (its weight file beside it).
        output: PathBuf,
        /// INITIALIZER KEY FILE: the bytes of FILE as blob KEY of INITIALIZER. Repeating the same
        /// INITIALIZER KEY adds buffers to that blob, in order.
        #[arg(long, num_args = 3, value_names = ["INITIALIZER", "KEY", "FILE"], required = true)]
        blob: Vec<String>,
        /// Weight file name, relative to OUTPUT's directory (default: OUTPUT's name + ".data").
        #[arg(long, value_name = "LOC")]
        external_data: Option<String>,
        /// Offset alignment of large tensors and blobs (power of two; 0 = packed).
        #[arg(long = "align", default_value_t = 4096, value_name = "N")]
        alignment: u64,
        /// Tensors and blobs of at least this many bytes are aligned to --align (smaller: up to
        /// 16 bytes).
        #[arg(long, default_value_t = 1 << 20, value_name = "N")]
        align_threshold: u64,
        /// Tensors with at least this many bytes go to the weight file (initializers with
        /// blobs always do).
        #[arg(long, default_value_t = 1024, value_name = "N")]
        size_threshold: u64,
        /// Write SHA-1 checksums (of the weight file, and of each blob buffer).
        #[arg(long)]
        checksum: bool,
    },
    /// Write the bytes of one buffer of a blob to a file.
    Extract {
        /// The model.
        model: PathBuf,
        /// Initializer name.
        initializer: String,
        /// Blob key.
        key: String,
        /// Output file.
        output: PathBuf,
        /// Buffer index within the blob.
        #[arg(long, default_value_t = 0)]
        buffer: usize,
        /// Verify checksums (weight files and blob buffers) while loading.
        #[arg(long)]
        verify: bool,
    },
}

/// The lines of a blob listing (used by `info` too).
pub(crate) fn listing(blobs: &PrepackedBlobs) -> Vec<String> {
    let mut out = Vec::new();
    for init in blobs.initializers() {
        let keys: Vec<&str> = blobs.keys_for(init).collect();
        out.push(format!("  {init}: {} blob(s)", keys.len()));
        for key in keys {
            let Some(b) = blobs.get(init, key) else {
                continue;
            };
            let sizes: Vec<String> = b.buffers.iter().map(|x| x.len().to_string()).collect();
            out.push(format!(
                "    {key}: {} buffer(s), {} bytes ({})",
                b.buffers.len(),
                b.total_len(),
                sizes.join(" + ")
            ));
        }
    }
    out
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    match &args.command {
        Cmd::List { model } => {
            let opts = LoadOptions::from(ParseOptions {
                no_copy: true,
                ..Default::default()
            });
            // The recorded entries (offsets, checksum fields) first, then the loaded blobs.
            let bare = onnx_light::load_model(
                model,
                &LoadOptions {
                    load_external_data: false,
                    ..Default::default()
                },
            )?;
            let mut entries = Vec::new();
            bare.visit_tensors(&mut |t| {
                for e in t.external_data() {
                    if e.key().as_bytes().starts_with(b"prepacked") {
                        entries.push(format!("  {}: {} = {}", t.name(), e.key(), e.value()));
                    }
                }
            });
            let (_, blobs) = onnx_light::load_model_with_prepacked(model, &opts)?;
            outln!("pre-packed blobs: {}", blobs.len());
            for l in listing(&blobs) {
                outln!("{l}");
            }
            if !entries.is_empty() {
                outln!("entries:");
                for e in entries {
                    outln!("{e}");
                }
            }
            Ok(())
        }
        Cmd::Attach {
            input,
            output,
            blob,
            external_data,
            alignment,
            align_threshold,
            size_threshold,
            checksum,
        } => {
            let opts = LoadOptions::from(ParseOptions {
                no_copy: true,
                ..Default::default()
            });
            let (model, mut blobs) = onnx_light::load_model_with_prepacked(input, &opts)?;
            // Blobs named on the command line replace blobs of the same key in the input.
            let triples: Vec<&[String]> = blob.chunks(3).collect();
            for t in &triples {
                blobs.remove(&t[0], &t[1]);
            }
            for t in triples {
                let bytes = std::fs::read(&t[2]).map_err(|e| Error::io(&t[2], e))?;
                blobs.push_buffer(&t[0], &t[1], bytes)?;
            }
            let sopts = SaveExternalOptions {
                location: external_data.clone(),
                size_threshold: *size_threshold,
                alignment: *alignment,
                align_threshold: *align_threshold,
                checksum: *checksum,
                ..Default::default()
            };
            let r = onnx_light::save_model_with_prepacked(&model, &blobs, output, &sopts)?;
            errln!(
                "wrote {}: {} tensors ({} bytes), {} pre-packed blob(s) ({} bytes) in {} weight \
                 file(s)",
                output.display(),
                r.external_tensors,
                r.external_bytes,
                r.prepacked_blobs,
                r.prepacked_bytes,
                r.files.len()
            );
            Ok(())
        }
        Cmd::Extract {
            model,
            initializer,
            key,
            output,
            buffer,
            verify,
        } => {
            let opts = LoadOptions {
                verify_external_checksums: *verify,
                ..LoadOptions::from(ParseOptions {
                    no_copy: true,
                    ..Default::default()
                })
            };
            let (_, blobs) = onnx_light::load_model_with_prepacked(model, &opts)?;
            let bytes = blobs
                .get(initializer, key)
                .and_then(|b| b.buffer(*buffer))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "no buffer {buffer} of pre-packed blob {key:?} of '{initializer}'"
                    ))
                })?;
            std::fs::write(output, bytes).map_err(|e| Error::io(output, e))?;
            Ok(())
        }
    }
}
