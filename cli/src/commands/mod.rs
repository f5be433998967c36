//! Command-line interface: argument parsing and dispatch to the subcommands.

/// Prints to stdout with [`terminal_safe`] applied (text from a model cannot drive the
/// terminal).
macro_rules! out {
    ($($arg:tt)*) => {
        print!("{}", $crate::commands::terminal_safe(&format!($($arg)*)))
    };
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        println!("{}", $crate::commands::terminal_safe(&format!($($arg)*)))
    };
}

/// Prints a line to stderr with [`terminal_safe`] applied.
macro_rules! errln {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::commands::terminal_safe(&format!($($arg)*)))
    };
}

mod check;
mod convert;
mod crypt;
mod external;
mod info;
mod params;
mod prepack;
mod remote;
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
        /// Path or URL (s3://, az://, http://, https://) of an .onnx file; a URL is read
        /// metadata-only (tensor payloads are not fetched).
        model: Option<PathBuf>,
        /// Parse with this many threads (negative: all cores).
        #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::commands::thread_count)]
        threads: i32,
        /// The passphrase of encrypted weight files.
        #[command(flatten)]
        key: crypt::OptionalKeySource,
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
    /// External data converted in memory: convert, populate, clear (writes OUTPUT inline).
    ExternalData(external::Args),
}

/// `text` with every control character but the newline and the tab (the tool's own column
/// separator; neither can drive a terminal) escaped, the way `git` and `ls` quote names: C0
/// controls and DEL as `\xNN` (`\r` by name), C1 controls and the bidirectional
/// overrides and isolates (which reorder what the terminal shows) as `\u{NNNN}`. Everything the
/// tool prints goes through it, because names, locations and error messages come from the model.
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && unsafe_char(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

/// A `--threads` value: a non-zero integer up to the library's cap (negative = all cores);
/// anything else is a usage error.
pub(crate) fn thread_count(s: &str) -> std::result::Result<i32, String> {
    let n: i32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a thread count"))?;
    let cap = onnx_light::max_threads();
    if n == 0 || (n > 0 && n as usize > cap) {
        return Err(format!(
            "{n} threads: give 1 ..= {cap} (4 x the cores, at least 16), or a negative number \
             for all cores"
        ));
    }
    Ok(n)
}

/// Runs the tool; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info {
            model,
            threads,
            key,
        } => info::run(model.as_deref(), threads, &key),
        Command::Roundtrip(args) => roundtrip::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Encrypt(args) => crypt::encrypt(&args),
        Command::Decrypt(args) => crypt::decrypt(&args),
        Command::Params(args) => params::run(&args),
        Command::Prepack(args) => prepack::run(&args),
        Command::ExternalData(args) => external::run(&args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            errln!("onnx-light: {e}");
            1
        }
    }
}
