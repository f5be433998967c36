//! `onnx-light convert IN OUT`: re-save a model with its weights in external files (one file,
//! split files, one per tensor; aligned; checksummed) or all inline (`--inline`; with `--align`,
//! every embedded payload aligned in the file). The input's own
//! external data is read with no copy (each weight file mapped once); its pre-packed blobs are
//! carried over (dropped with `--inline`). `--encrypt` writes a fully encrypted model directory
//! in one step: the weight files as `--encrypt-weights` does and the `.onnx` itself as `encrypt`
//! does, committed last like every save.

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use onnx_light::{LoadOptions, ParseOptions, Result, SaveExternalOptions, SerializeOptions};

/// Arguments of `convert`.
#[derive(clap::Args)]
pub struct Args {
    /// Input model (.onnx; its external data is read relative to its directory).
    input: PathBuf,
    /// Output model.
    output: PathBuf,
    /// Weight file name, relative to OUT's directory (default: OUT's file name + ".data"; an
    /// absolute path is reduced to its file name).
    #[arg(long, value_name = "LOC")]
    external_data: Option<String>,
    /// Tensors with at least this many bytes go to the weight file.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    size_threshold: u64,
    /// Offset alignment of large tensors in the weight file (power of two; 0 = packed; 65536
    /// for Windows mapping; default 4096). With --inline: every embedded payload of at least
    /// --size-threshold bytes starts at a multiple of N (64 ..= 65536) in OUT, after a padding
    /// field, so that a no-copy load borrows it from the file's map (without --align, --inline
    /// writes protobuf's bytes).
    #[arg(long = "align", value_name = "N")]
    alignment: Option<u64>,
    /// Tensors of at least this many bytes are aligned to --align (smaller: up to 16 bytes;
    /// default 0: every tensor).
    #[arg(long, default_value_t = 0, value_name = "N")]
    align_threshold: u64,
    /// Split the weights into files of at most N bytes: LOC, LOC.1, LOC.2, ...
    #[arg(long = "max-file-size", default_value_t = 0, value_name = "N")]
    max_file_size: u64,
    /// One weight file per tensor, named after the tensor.
    #[arg(long, conflicts_with_all = ["external_data", "max_file_size"])]
    per_tensor_files: bool,
    /// Also move tensors of node attributes.
    #[arg(long)]
    convert_attribute: bool,
    /// Also move sparse tensors (the onnx package cannot read them from weight files).
    #[arg(long)]
    externalize_sparse: bool,
    /// Write the SHA-1 of each weight file into the model (`checksum` entries).
    #[arg(long)]
    checksum: bool,
    /// Write every tensor inline (a single .onnx, no weight files).
    #[arg(long, conflicts_with_all = ["external_data", "max_file_size", "per_tensor_files", "checksum"])]
    inline: bool,
    /// Verify the input's checksums while loading it.
    #[arg(long)]
    verify: bool,
    /// Threads for loading and writing (negative: all cores).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, value_parser = crate::commands::thread_count)]
    threads: i32,
    /// Write every weight file encrypted (ONNXCRYS chunked format) with the passphrase of
    /// --key-file / --key-env; offsets in the model are plaintext offsets.
    #[arg(long, requires = "weights_key", conflicts_with = "inline")]
    encrypt_weights: bool,
    /// Write a fully encrypted model directory in one step: every weight file encrypted as with
    /// --encrypt-weights, and OUT itself encrypted (as `encrypt` does; --model-format) with the
    /// same passphrase of --key-file / --key-env. Crash-safe: OUT is written to a temporary file
    /// and renamed last. With --inline, OUT alone (no weight files), encrypted. Read it back
    /// with the passphrase (`load_encrypted_model` with `external_data_key`; `decrypt` recovers
    /// the plaintext .onnx).
    #[arg(long, requires = "weights_key")]
    encrypt: bool,
    /// Format of OUT with --encrypt: 1, 2, 3 (ONNXCRY3, AES-256-GCM, the default) or chunked,
    /// as `encrypt --format`.
    #[arg(long, default_value = "3", value_parser = super::crypt::parse_format, requires = "encrypt")]
    model_format: onnx_light::crypto::EncryptionFormat,
    /// Cipher of encrypted weight files: aes-gcm (default) or chacha20-poly1305.
    #[arg(long, default_value = "aes-gcm", value_parser = super::crypt::parse_cipher)]
    cipher: onnx_light::crypto::ChunkCipher,
    /// Plaintext bytes per chunk of encrypted weight files (64 ..= 67108864).
    #[arg(long, default_value_t = onnx_light::crypto::DEFAULT_CHUNK_SIZE)]
    chunk_size: u32,
    /// The passphrase: reads the input's encrypted weight files, and encrypts the output's with
    /// --encrypt-weights.
    #[command(flatten)]
    key: super::crypt::OptionalKeySource,
}

/// A progress bar on stderr, drawn only when stderr is a terminal and the job is large.
pub(crate) fn progress_bar(total: u64, what: &str) -> Option<ProgressBar> {
    if total < (64 << 20) || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    Some(bar)
}

/// Whether the output is to be encrypted (the model or its weights).
fn model_encryption_asked(args: &Args) -> bool {
    args.encrypt || args.encrypt_weights
}

/// Runs the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let key = args.key.read()?;
    let popts = LoadOptions {
        verify_external_checksums: args.verify,
        external_data_key: key.clone(),
        ..LoadOptions::from(ParseOptions {
            no_copy: true,
            num_threads: args.threads,
            ..Default::default()
        })
    };
    let (model, blobs) = match super::remote::url(&args.input) {
        Some(url) => (super::remote::load(url, &popts)?, Default::default()),
        None => onnx_light::load_model_with_prepacked(&args.input, &popts)?,
    };
    let remote_out = super::remote::url(&args.output);
    if remote_out.is_some() && (model_encryption_asked(args) || !blobs.is_empty()) {
        return Err(onnx_light::Error::Unsupported(
            "encrypted models and pre-packed blobs are written to local files only".into(),
        ));
    }
    // `--encrypt`: the model file too, with the weights' passphrase (`requires` makes it given).
    let model_encryption = match (&key, args.encrypt) {
        (Some(k), true) => Some((
            k,
            onnx_light::EncryptionOptions {
                format: args.model_format,
                serialize: SerializeOptions {
                    num_threads: args.threads,
                    ..Default::default()
                },
                ..Default::default()
            },
        )),
        _ => None,
    };
    if args.inline {
        if !blobs.is_empty() {
            errln!(
                "note: {} pre-packed blob(s) dropped (they live in weight files only)",
                blobs.len()
            );
        }
        let sopts = SerializeOptions {
            num_threads: args.threads,
            raw_data_threshold: args.size_threshold,
            inline_alignment: args.alignment.unwrap_or(0),
            ..Default::default()
        };
        let what = match &model_encryption {
            Some((k, mopts)) => {
                // The paddings align the payloads in the plaintext.
                let mopts = &onnx_light::EncryptionOptions {
                    serialize: sopts.clone(),
                    ..mopts.clone()
                };
                onnx_light::save_encrypted_model(&model, &args.output, k.as_bytes(), mopts)?;
                format!(", encrypted as {}", mopts.format)
            }
            None => {
                match remote_out {
                    Some(url) => super::remote::save(&model, url, &sopts, None)?,
                    None => onnx_light::save_model(&model, &args.output, &sopts)?,
                }
                String::new()
            }
        };
        let aligned = match sopts.inline_alignment {
            0 => String::new(),
            a => format!(
                ", payloads of at least {} bytes aligned to {a}",
                args.size_threshold
            ),
        };
        errln!(
            "wrote {} (all tensors inline{aligned}{what})",
            args.output.display()
        );
        return Ok(());
    }
    let opts = SaveExternalOptions {
        location: args.external_data.clone(),
        size_threshold: args.size_threshold,
        all_tensors_to_one_file: !args.per_tensor_files,
        alignment: args.alignment.unwrap_or(4096),
        align_threshold: args.align_threshold,
        max_external_file_size: args.max_file_size,
        convert_attribute: args.convert_attribute,
        externalize_sparse: args.externalize_sparse,
        checksum: args.checksum,
        num_threads: args.threads,
        encryption: match (&key, args.encrypt_weights || args.encrypt) {
            (Some(k), true) => Some(onnx_light::ExternalEncryption {
                key: k.clone(),
                cipher: args.cipher,
                chunk_size: args.chunk_size,
            }),
            _ => None,
        },
        ..Default::default()
    };
    if let Some(url) = remote_out {
        let sopts = SerializeOptions {
            num_threads: args.threads,
            ..Default::default()
        };
        return super::remote::save(&model, url, &sopts, Some(&opts));
    }
    let mut total = 0u64;
    model.visit_tensors(&mut |t| total += t.raw_data_opt().map_or(0, |r| r.len() as u64));
    let bar = progress_bar(total, "writing");
    let tick = |done: u64, _total: u64| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    };
    // One save request: pre-packed blobs are carried over, right after their initializers
    // again; an encrypted .onnx is written as the commit point.
    let mut request = onnx_light::external::SaveRequest::new(&model, &args.output, &opts)
        .prepacked(&blobs)
        .progress(&tick);
    if let Some((_, mopts)) = &model_encryption {
        request = request.encrypt_model(mopts);
    }
    let report = request.save()?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    errln!(
        "wrote {}{}: {} tensors ({} bytes) in {} {}weight file(s)",
        args.output.display(),
        match &model_encryption {
            Some((_, m)) => format!(" (encrypted as {})", m.format),
            None => String::new(),
        },
        report.external_tensors,
        report.external_bytes,
        report.files.len(),
        if opts.encryption.is_some() {
            "encrypted "
        } else {
            ""
        }
    );
    if report.prepacked_blobs > 0 {
        errln!(
            "  with {} pre-packed blob(s) ({} bytes)",
            report.prepacked_blobs,
            report.prepacked_bytes
        );
    }
    Ok(())
}
