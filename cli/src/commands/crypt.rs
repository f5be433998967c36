//! `onnx-light encrypt` / `onnx-light decrypt`: encrypted models and files.
//!
//! The passphrase never comes from the command line (it would show in `ps` and shell history):
//! it is read from a file (`--key-file`, its bytes exactly, minus one trailing newline) or an
//! environment variable (`--key-env`).

use std::path::{Path, PathBuf};

use clap::ArgGroup;
use onnx_light::crypto::{self, ChunkCipher, EncryptionFormat, EncryptionOptions};
use onnx_light::{Error, LoadOptions, ParseOptions, Result};
use zeroize::Zeroizing;

/// Where the passphrase comes from.
#[derive(clap::Args)]
#[command(group(ArgGroup::new("key").required(true).args(["key_file", "key_env"])))]
pub struct KeySource {
    /// Read the passphrase from this file: its bytes exactly, except that one trailing newline
    /// (LF or CRLF) is removed.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// Read the passphrase from this environment variable.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
}

impl KeySource {
    /// The passphrase bytes (zeroed when dropped).
    fn read(&self) -> Result<Zeroizing<Vec<u8>>> {
        read_key(&self.key_file, &self.key_env)
    }
}

/// An optional passphrase (e.g. of encrypted weight files), from a file or an environment
/// variable as for `encrypt`.
#[derive(clap::Args)]
#[command(group(ArgGroup::new("weights_key").required(false).args(["key_file", "key_env"])))]
pub struct OptionalKeySource {
    /// Read the passphrase of encrypted weight files from this file (its bytes exactly, minus
    /// one trailing newline).
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// Read the passphrase of encrypted weight files from this environment variable.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
}

impl OptionalKeySource {
    /// The passphrase, when one is given.
    pub fn read(&self) -> Result<Option<crypto::Passphrase>> {
        if self.key_file.is_none() && self.key_env.is_none() {
            return Ok(None);
        }
        let key = read_key(&self.key_file, &self.key_env)?;
        Ok(Some(crypto::Passphrase::new(&key)))
    }
}

/// Largest passphrase file read (a key file is small; this refuses `/dev/zero`-like surprises
/// and mistakes such as a model given as the key).
const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// The passphrase from `key_file` or `key_env` (zeroed when dropped).
fn read_key(key_file: &Option<PathBuf>, key_env: &Option<String>) -> Result<Zeroizing<Vec<u8>>> {
    {
        if let Some(path) = key_file {
            let mut key = Zeroizing::new(onnx_light::storage::read_small_regular_file(
                path,
                MAX_KEY_FILE_BYTES,
            )?);
            if key.last() == Some(&b'\n') {
                key.pop();
                if key.last() == Some(&b'\r') {
                    key.pop();
                }
            }
            return Ok(key);
        }
        if let Some(var) = key_env {
            let value = std::env::var_os(var).ok_or_else(|| {
                Error::InvalidArgument(format!("environment variable {var} is not set"))
            })?;
            return Ok(Zeroizing::new(os_bytes(value)?));
        }
        Err(Error::InvalidArgument(
            "give the passphrase with --key-file PATH or --key-env VAR".into(),
        ))
    }
}

#[cfg(unix)]
fn os_bytes(s: std::ffi::OsString) -> Result<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    Ok(s.into_vec())
}

#[cfg(not(unix))]
fn os_bytes(s: std::ffi::OsString) -> Result<Vec<u8>> {
    s.into_string()
        .map(String::into_bytes)
        .map_err(|_| Error::InvalidArgument("the passphrase variable is not valid Unicode".into()))
}

/// Arguments of `encrypt`.
#[derive(clap::Args)]
pub struct EncryptArgs {
    /// The model (or, with --raw, any file) to encrypt.
    input: PathBuf,
    /// The encrypted file to write (replaced atomically).
    output: PathBuf,
    /// 1 = ONNXCRY1 (AES-256-CBC, UNAUTHENTICATED, compatibility only), 2 = ONNXCRY2
    /// (ChaCha20-Poly1305), 3 = ONNXCRY3 (AES-256-GCM, the default), chunked = ONNXCRYS
    /// (streaming, any size, bounded memory; this library only).
    #[arg(long, default_value = "3", value_parser = parse_format)]
    format: EncryptionFormat,
    /// Cipher of the chunked format: aes-gcm (default) or chacha20-poly1305.
    #[arg(long, default_value = "aes-gcm", value_parser = parse_cipher)]
    cipher: ChunkCipher,
    /// Plaintext bytes per chunk of the chunked format (64 ..= 67108864).
    #[arg(long, default_value_t = crypto::DEFAULT_CHUNK_SIZE)]
    chunk_size: u32,
    /// Encrypt any file (e.g. external data), not only a model (which is otherwise checked to
    /// parse first).
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    key: KeySource,
}

/// Arguments of `decrypt`.
#[derive(clap::Args)]
pub struct DecryptArgs {
    /// The encrypted file (any format, recognized by its magic).
    input: PathBuf,
    /// The decrypted file to write (replaced atomically, only when decryption succeeded).
    output: PathBuf,
    #[command(flatten)]
    key: KeySource,
}

pub(crate) fn parse_format(s: &str) -> std::result::Result<EncryptionFormat, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "onnxcry1" => Ok(EncryptionFormat::AesCbc),
        "2" | "onnxcry2" => Ok(EncryptionFormat::ChaCha20Poly1305),
        "3" | "onnxcry3" => Ok(EncryptionFormat::AesGcm),
        "chunked" | "s" | "onnxcrys" => Ok(EncryptionFormat::Chunked),
        _ => Err(format!(
            "unknown format {s:?} (expected 1, 2, 3 or chunked)"
        )),
    }
}

pub(crate) fn parse_cipher(s: &str) -> std::result::Result<ChunkCipher, String> {
    match s.to_ascii_lowercase().as_str() {
        "aes-gcm" | "aes-256-gcm" => Ok(ChunkCipher::AesGcm),
        "chacha20-poly1305" | "chacha" => Ok(ChunkCipher::ChaCha20Poly1305),
        _ => Err(format!(
            "unknown cipher {s:?} (expected aes-gcm or chacha20-poly1305)"
        )),
    }
}

/// Checks that `path` is a model: mapped, structure only, external data not read (cheap at any
/// size).
fn check_model(path: &Path) -> Result<()> {
    let opts = LoadOptions {
        load_external_data: false,
        ..LoadOptions::from(ParseOptions {
            no_copy: true,
            file_load_mode: onnx_light::FileLoadMode::Mmap,
            // A check: borrow every payload wherever it is (no aligned copies).
            alignment: 1,
            ..Default::default()
        })
    };
    onnx_light::parse_from_file::<onnx_light::ModelProto>(path, &opts)
        .map(drop)
        .map_err(|e| match e {
            Error::Decode(d) => Error::InvalidArgument(format!(
                "{} is not a valid model ({d}); use --raw to encrypt any file",
                path.display()
            )),
            e => e,
        })
}

/// Runs `encrypt`.
pub fn encrypt(args: &EncryptArgs) -> Result<()> {
    let key = args.key.read()?;
    if !args.raw {
        check_model(&args.input)?;
    }
    let opts = EncryptionOptions {
        format: args.format,
        chunk_cipher: args.cipher,
        chunk_size: args.chunk_size,
        ..Default::default()
    };
    let len = crypto::encrypt_file(&args.input, &args.output, &key, &opts)?;
    let note = if args.format.is_authenticated() {
        ""
    } else {
        " (unauthenticated: prefer format 3)"
    };
    outln!(
        "encrypted {len} bytes as {}{note}: {}",
        args.format,
        args.output.display()
    );
    Ok(())
}

/// Runs `decrypt`.
pub fn decrypt(args: &DecryptArgs) -> Result<()> {
    let key = args.key.read()?;
    let format = crypto::detect_file_format(&args.input)?;
    if format == EncryptionFormat::AesCbc {
        errln!(
            "onnx-light: warning: {} is ONNXCRY1 (AES-256-CBC), an unauthenticated format: a \
             modified file cannot be detected; re-encrypt it with ONNXCRY3 or the chunked format",
            args.input.display()
        );
    }
    let len = crypto::decrypt_file(&args.input, &args.output, &key)?;
    outln!(
        "decrypted {len} bytes from {format}: {}",
        args.output.display()
    );
    Ok(())
}
