//! ONNXCRYS version 1: this library's chunked, streaming AEAD format (spec: docs/encryption.md).
//!
//! ```text
//! header (36 bytes, bound as AAD of every chunk)
//!   0   8  magic "ONNXCRYS"
//!   8   1  version = 1
//!   9   1  cipher: 2 = ChaCha20-Poly1305, 3 = AES-256-GCM
//!  10   2  reserved, zero
//!  12   4  chunk size C (plaintext bytes per chunk), u32 little-endian, 64 ..= 64 MiB
//!  16  16  PBKDF2 salt
//!  32   4  nonce prefix (random)
//! chunks i = 0, 1, ..., n-1:  ciphertext_i || tag_i (16)
//!   nonce_i = prefix || i as u64 big-endian;  AAD_i = header || (1 if i is the last, else 0)
//!   every chunk but the last holds exactly C plaintext bytes; the last holds 0 ..= C-1
//! ```
//!
//! The key is PBKDF2-HMAC-SHA256(passphrase, salt, 100 000) as for ONNXCRY1/2/3. The counter in
//! the nonce detects reordering, the last-chunk flag truncation at a chunk boundary and
//! extension, and the header in the AAD any change to the parameters. Memory is one chunk.

// Without the `encryption` feature the ciphers are not compiled: `ChunkKey::with_derived` fails
// with `Error::Unsupported`, and what only serves a key is unused.
#![cfg_attr(not(feature = "encryption"), allow(dead_code, unused_imports))]

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[cfg(feature = "encryption")]
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use zeroize::Zeroizing;

use super::Params;
use super::format::{ChunkCipher, MAGIC_CHUNKED, MAGIC_LEN};
use super::kdf::{DerivedKey, SALT_LEN, derive_key};
use crate::error::{Error, Result};
use crate::secret::SecretBytes;
use crate::wire::Sink;

/// The version written and read.
pub const VERSION: u8 = 1;
/// Length of the header.
pub const HEADER_LEN: usize = 36;
/// Length of each chunk's tag.
pub const TAG_LEN: usize = 16;
/// Length of the random nonce prefix.
pub const NONCE_PREFIX_LEN: usize = 4;
/// Smallest chunk size.
pub const MIN_CHUNK_SIZE: u32 = 64;
/// Largest chunk size (bounds the memory of a reader).
pub const MAX_CHUNK_SIZE: u32 = 64 << 20;
/// The default chunk size (1 MiB).
pub const DEFAULT_CHUNK_SIZE: u32 = 1 << 20;

const NAME: &str = "ONNXCRYS";

fn check_chunk_size(chunk_size: u32) -> Result<()> {
    if !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&chunk_size) {
        return Err(Error::InvalidOption {
            name: "chunk_size",
            reason: format!("{chunk_size} is outside {MIN_CHUNK_SIZE} ..= {MAX_CHUNK_SIZE}"),
        });
    }
    Ok(())
}

/// The header of a new file.
fn build_header(cipher: ChunkCipher, chunk_size: u32, params: &Params) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..MAGIC_LEN].copy_from_slice(MAGIC_CHUNKED);
    h[8] = VERSION;
    h[9] = cipher as u8;
    h[12..16].copy_from_slice(&chunk_size.to_le_bytes());
    h[16..32].copy_from_slice(&params.salt);
    h[32..36].copy_from_slice(&params.iv[..NONCE_PREFIX_LEN]);
    h
}

/// The per-file key and parameters: seals and opens chunks.
pub(crate) struct ChunkKey {
    #[cfg(feature = "encryption")]
    key: LessSafeKey,
    header: [u8; HEADER_LEN],
    chunk_size: usize,
}

/// Checks a header (magic, version, cipher, reserved bytes, chunk size) without deriving the
/// key; returns the cipher and the chunk size.
fn check_header(header: &[u8; HEADER_LEN]) -> Result<(ChunkCipher, usize)> {
    if &header[..MAGIC_LEN] != MAGIC_CHUNKED {
        return Err(Error::Crypto("bad magic: not ONNXCRYS data".into()));
    }
    if header[8] != VERSION {
        return Err(Error::Crypto(format!(
            "unsupported ONNXCRYS version {} (this library reads version {VERSION})",
            header[8]
        )));
    }
    let cipher = ChunkCipher::from_id(header[9])
        .ok_or_else(|| Error::Crypto(format!("ONNXCRYS: unknown cipher id {}", header[9])))?;
    if header[10..12] != [0, 0] {
        return Err(Error::Crypto(
            "ONNXCRYS: reserved header bytes are not zero".into(),
        ));
    }
    let mut cs = [0u8; 4];
    cs.copy_from_slice(&header[12..16]);
    let chunk_size = u32::from_le_bytes(cs);
    check_chunk_size(chunk_size)
        .map_err(|_| Error::Crypto(format!("ONNXCRYS: invalid chunk size {chunk_size}")))?;
    Ok((cipher, chunk_size as usize))
}

impl ChunkKey {
    /// Checks a header and derives the key.
    fn new(passphrase: &[u8], header: [u8; HEADER_LEN]) -> Result<Self> {
        let derived = derive_key(passphrase, &header_salt(&header));
        Self::with_derived(&derived, header)
    }

    /// Checks a header; `derived` is the key of its salt.
    fn with_derived(derived: &DerivedKey, header: [u8; HEADER_LEN]) -> Result<Self> {
        let (cipher, chunk_size) = check_header(&header)?;
        #[cfg(not(feature = "encryption"))]
        {
            let _ = (derived, cipher, chunk_size);
            Err(Error::feature_missing("encryption"))
        }
        #[cfg(feature = "encryption")]
        let key = UnboundKey::new(cipher.algorithm(), derived.bytes())
            .map_err(|_| Error::Crypto("ONNXCRYS: cannot set up the cipher".into()))?;
        #[cfg(feature = "encryption")]
        Ok(Self {
            key: LessSafeKey::new(key),
            header,
            chunk_size,
        })
    }

    #[cfg(feature = "encryption")]
    fn nonce(&self, index: u64) -> Nonce {
        let mut n = [0u8; 12];
        n[..NONCE_PREFIX_LEN].copy_from_slice(&self.header[32..36]);
        n[NONCE_PREFIX_LEN..].copy_from_slice(&index.to_be_bytes());
        Nonce::assume_unique_for_key(n)
    }

    fn aad(&self, last: bool) -> [u8; HEADER_LEN + 1] {
        let mut a = [0u8; HEADER_LEN + 1];
        a[..HEADER_LEN].copy_from_slice(&self.header);
        a[HEADER_LEN] = u8::from(last);
        a
    }

    /// Encrypts chunk `index` in place; returns its tag.
    #[cfg(feature = "encryption")]
    fn seal(&self, index: u64, last: bool, in_out: &mut [u8]) -> Result<[u8; TAG_LEN]> {
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(index), Aad::from(self.aad(last)), in_out)
            .map_err(|_| Error::Crypto("ONNXCRYS: chunk encryption failed".into()))?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Decrypts and authenticates chunk `index` in place; on failure `in_out` is zeroed.
    #[cfg(feature = "encryption")]
    fn open(&self, index: u64, last: bool, in_out: &mut [u8], tag: &[u8; TAG_LEN]) -> Result<()> {
        let r = self.key.open_in_place_separate_tag(
            self.nonce(index),
            Aad::from(self.aad(last)),
            Tag::from(*tag),
            in_out,
            0..,
        );
        if r.is_err() {
            in_out.fill(0);
            let which = if last { "last chunk" } else { "chunk" };
            return Err(Error::Authentication(format!(
                "{NAME} {which} {index} does not authenticate"
            )));
        }
        Ok(())
    }

    /// Without the `encryption` feature no `ChunkKey` is ever made ([`ChunkKey::with_derived`]
    /// fails): the same signatures, failing.
    #[cfg(not(feature = "encryption"))]
    fn seal(&self, _index: u64, _last: bool, _in_out: &mut [u8]) -> Result<[u8; TAG_LEN]> {
        Err(Error::feature_missing("encryption"))
    }

    /// See the `seal` above.
    #[cfg(not(feature = "encryption"))]
    fn open(
        &self,
        _index: u64,
        _last: bool,
        in_out: &mut [u8],
        _tag: &[u8; TAG_LEN],
    ) -> Result<()> {
        in_out.fill(0);
        Err(Error::feature_missing("encryption"))
    }
}

/// The PBKDF2 salt of a header.
pub(crate) fn header_salt(header: &[u8; HEADER_LEN]) -> [u8; SALT_LEN] {
    let mut salt = [0u8; SALT_LEN];
    salt.copy_from_slice(&header[16..32]);
    salt
}

/// Derived keys by salt, for files that share one (the weight files of one save share a salt
/// and have distinct nonce prefixes, so a load derives the key once, not once per file).
pub(crate) struct KeyCache {
    passphrase: Zeroizing<Vec<u8>>,
    keys: Mutex<Vec<([u8; SALT_LEN], Arc<DerivedKey>)>>,
}

impl KeyCache {
    pub(crate) fn new(passphrase: &[u8]) -> Self {
        Self {
            passphrase: Zeroizing::new(passphrase.to_vec()),
            keys: Mutex::new(Vec::new()),
        }
    }

    /// The key of `salt` (derived the first time).
    pub(crate) fn key(&self, salt: &[u8; SALT_LEN]) -> Arc<DerivedKey> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, k)) = keys.iter().find(|(s, _)| s == salt) {
            return k.clone();
        }
        let k = Arc::new(derive_key(&self.passphrase, salt));
        keys.push((*salt, k.clone()));
        k
    }
}

/// Number of chunks and plaintext length of `body_len` bytes of chunks.
fn layout(body_len: u64, chunk_size: usize) -> Result<(u64, u64)> {
    let cs = chunk_size as u64;
    let full = cs + TAG_LEN as u64;
    let n_full = body_len / full;
    let rem = body_len % full;
    if rem < TAG_LEN as u64 {
        return Err(Error::Crypto(if rem == 0 {
            format!("truncated: {NAME} data ends after chunk {n_full} without its last chunk")
        } else {
            format!("truncated: {NAME} last chunk of {rem} bytes is shorter than its tag")
        }));
    }
    Ok((n_full + 1, n_full * cs + (rem - TAG_LEN as u64)))
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Encrypts a stream of plaintext into an ONNXCRYS stream written to `W`, one chunk at a time.
///
/// Write plaintext with [`StreamEncryptor::write_plaintext`], [`Write`], [`Sink`] or
/// [`StreamEncryptor::read_from`], then call [`StreamEncryptor::finish`]: it writes the last
/// chunk. Without `finish`, the output has no last chunk and every reader reports it as
/// truncated. The plaintext buffer (one chunk) is zeroed when dropped.
pub struct StreamEncryptor<W: Write> {
    inner: W,
    key: ChunkKey,
    buf: Zeroizing<Vec<u8>>,
    fill: usize,
    index: u64,
    written: u64,
    error: Option<Error>,
    label: PathBuf,
}

impl<W: Write> StreamEncryptor<W> {
    /// Writes the header of a new ONNXCRYS stream (random salt and nonce prefix) to `inner`.
    pub fn new(inner: W, passphrase: &[u8], cipher: ChunkCipher, chunk_size: u32) -> Result<Self> {
        Self::with_params(inner, passphrase, cipher, chunk_size, &Params::random()?)
    }

    pub(crate) fn with_params(
        inner: W,
        passphrase: &[u8],
        cipher: ChunkCipher,
        chunk_size: u32,
        params: &Params,
    ) -> Result<Self> {
        super::require_encryption()?;
        check_chunk_size(chunk_size)?;
        let derived = derive_key(passphrase, &params.salt);
        Self::with_derived(inner, &derived, cipher, chunk_size, params)
    }

    /// A stream whose key `derived` was derived from `params.salt` by the caller (files of one
    /// save share the salt and the key; each MUST then have its own nonce prefix,
    /// `params.iv[..4]`).
    pub(crate) fn with_derived(
        mut inner: W,
        derived: &DerivedKey,
        cipher: ChunkCipher,
        chunk_size: u32,
        params: &Params,
    ) -> Result<Self> {
        check_chunk_size(chunk_size)?;
        let header = build_header(cipher, chunk_size, params);
        let key = ChunkKey::with_derived(derived, header)?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(chunk_size as usize)
            .map_err(|_| Error::alloc_failed(chunk_size, "a chunk buffer"))?;
        buf.resize(chunk_size as usize, 0);
        let label = PathBuf::from("<encrypted stream>");
        inner
            .write_all(&header)
            .map_err(|e| Error::io(label.clone(), e))?;
        Ok(Self {
            inner,
            key,
            buf: Zeroizing::new(buf),
            fill: 0,
            index: 0,
            written: 0,
            error: None,
            label,
        })
    }

    /// Names the destination in I/O errors.
    pub(crate) fn set_label(&mut self, label: &Path) {
        self.label = label.to_path_buf();
    }

    /// Plaintext bytes accepted so far.
    pub fn plaintext_len(&self) -> u64 {
        self.written
    }

    /// The size of the stream for `plaintext_len` bytes with chunks of `chunk_size` bytes.
    pub fn encrypted_len(plaintext_len: u64, chunk_size: u32) -> u64 {
        let cs = u64::from(chunk_size.max(1));
        HEADER_LEN as u64 + plaintext_len + (plaintext_len / cs + 1) * TAG_LEN as u64
    }

    fn seal_chunk(&mut self, last: bool) -> Result<()> {
        let tag = self
            .key
            .seal(self.index, last, &mut self.buf[..self.fill])?;
        let w = self
            .inner
            .write_all(&self.buf[..self.fill])
            .and_then(|()| self.inner.write_all(&tag));
        w.map_err(|e| Error::io(self.label.clone(), e))?;
        self.index += 1;
        self.fill = 0;
        Ok(())
    }

    /// Encrypts `data` (buffered up to a chunk).
    pub fn write_plaintext(&mut self, mut data: &[u8]) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(Error::Crypto(format!("an earlier write failed: {e}")));
        }
        while !data.is_empty() {
            let n = data.len().min(self.buf.len() - self.fill);
            self.buf[self.fill..self.fill + n].copy_from_slice(&data[..n]);
            self.fill += n;
            self.written += n as u64;
            data = &data[n..];
            if self.fill == self.buf.len() {
                // A full chunk is never the last one (the last holds fewer than C bytes).
                self.seal_chunk(false)?;
            }
        }
        Ok(())
    }

    /// Encrypts everything `reader` yields, reading straight into the chunk buffer; returns the
    /// number of bytes read.
    pub fn read_from(&mut self, reader: &mut impl Read) -> Result<u64> {
        let mut total = 0u64;
        loop {
            let n = match reader.read(&mut self.buf[self.fill..]) {
                Ok(0) => return Ok(total),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("<plaintext source>", e)),
            };
            self.fill += n;
            self.written += n as u64;
            total += n as u64;
            if self.fill == self.buf.len() {
                self.seal_chunk(false)?;
            }
        }
    }

    /// Writes the last chunk and flushes; returns the writer.
    pub fn finish(mut self) -> Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.seal_chunk(true)?;
        self.inner
            .flush()
            .map_err(|e| Error::io(self.label.clone(), e))?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for StreamEncryptor<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_plaintext(data).map_err(io::Error::other)?;
        Ok(data.len())
    }

    /// Flushes the underlying writer (a partial chunk stays buffered until it is full or
    /// `finish` is called).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Sink for StreamEncryptor<W> {
    fn put(&mut self, bytes: &[u8]) {
        if self.error.is_none()
            && let Err(e) = self.write_plaintext(bytes)
        {
            self.error = Some(e);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sequential reading

/// Reads as many bytes as possible (until `buf` is full or the end of the stream).
/// Size of a stream decryptor's buffer before the first chunk's ciphertext has arrived.
const FIRST_READ_BYTES: usize = 64 << 10;

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Checks the magic and reads the rest of the header from a stream.
fn read_header(r: &mut impl Read, label: &Path) -> Result<[u8; HEADER_LEN]> {
    let mut header = [0u8; HEADER_LEN];
    let n = read_full(r, &mut header).map_err(|e| Error::io(label, e))?;
    super::EncryptionFormat::detect(&header[..n]).and_then(|f| {
        if f == super::EncryptionFormat::Chunked {
            Ok(())
        } else {
            Err(Error::Crypto(format!(
                "{f} data is not a stream (ONNXCRYS): decrypt it in memory"
            )))
        }
    })?;
    if n < HEADER_LEN {
        return Err(Error::Crypto(format!(
            "truncated: {NAME} data of {n} bytes is shorter than its {HEADER_LEN}-byte header"
        )));
    }
    Ok(header)
}

/// Decrypts an ONNXCRYS stream from `R`, one authenticated chunk at a time.
///
/// Every byte it returns has been authenticated as the right bytes at the right position; the
/// end of the data is authenticated only when the last chunk has been read, so a consumer must
/// treat the output as valid only after reading to the end without error (the file functions
/// write to a temporary file and rename it only then).
pub struct StreamDecryptor<R: Read> {
    inner: R,
    key: ChunkKey,
    buf: Zeroizing<Vec<u8>>,
    pos: usize,
    end: usize,
    index: u64,
    done: bool,
    label: PathBuf,
}

impl<R: Read> StreamDecryptor<R> {
    /// Reads and checks the header from `inner` and derives the key.
    pub fn new(mut inner: R, passphrase: &[u8]) -> Result<Self> {
        super::require_encryption()?;
        let label = PathBuf::from("<encrypted stream>");
        let header = read_header(&mut inner, &label)?;
        let key = ChunkKey::new(passphrase, header)?;
        // The buffer grows to the chunk size as ciphertext arrives (`next_chunk`): a header
        // claiming 64 MiB chunks costs nothing until the data is there.
        let mut buf = Vec::new();
        let len = (key.chunk_size + TAG_LEN).min(FIRST_READ_BYTES);
        buf.try_reserve_exact(len)
            .map_err(|_| Error::alloc_failed(len, "the decrypted data"))?;
        buf.resize(len, 0);
        Ok(Self {
            inner,
            key,
            buf: Zeroizing::new(buf),
            pos: 0,
            end: 0,
            index: 0,
            done: false,
            label,
        })
    }

    /// The chunk size of the stream.
    pub fn chunk_size(&self) -> usize {
        self.key.chunk_size
    }

    /// Names the source in I/O errors.
    pub(crate) fn set_label(&mut self, label: &Path) {
        self.label = label.to_path_buf();
    }

    /// The next chunk of plaintext (`None` after the last chunk).
    pub fn next_chunk(&mut self) -> Result<Option<&[u8]>> {
        if self.done {
            return Ok(None);
        }
        let full = self.key.chunk_size + TAG_LEN;
        let mut n = 0;
        loop {
            n += read_full(&mut self.inner, &mut self.buf[n..])
                .map_err(|e| Error::io(&self.label, e))?;
            if n < self.buf.len() || self.buf.len() == full {
                break;
            }
            // Only while reading the first chunk (afterwards the buffer has its full size), so
            // the buffer holds ciphertext only; the old one is zeroed when dropped anyway.
            let to = self.buf.len().saturating_mul(4).min(full);
            let mut bigger = Vec::new();
            bigger
                .try_reserve_exact(to)
                .map_err(|_| Error::alloc_failed(to, "a chunk buffer"))?;
            bigger.extend_from_slice(&self.buf);
            bigger.resize(to, 0);
            self.buf = Zeroizing::new(bigger);
        }
        let last = n < full;
        if n < TAG_LEN {
            return Err(Error::Crypto(if n == 0 {
                format!(
                    "truncated: {NAME} data ends after chunk {} without its last chunk",
                    self.index
                )
            } else {
                format!("truncated: {NAME} last chunk of {n} bytes is shorter than its tag")
            }));
        }
        let ct_len = n - TAG_LEN;
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&self.buf[ct_len..n]);
        self.key
            .open(self.index, last, &mut self.buf[..ct_len], &tag)?;
        self.index += 1;
        self.done = last;
        self.pos = 0;
        self.end = ct_len;
        Ok(Some(&self.buf[..ct_len]))
    }

    /// Decrypts the whole stream into `writer`; returns the number of plaintext bytes.
    pub fn decrypt_to(mut self, writer: &mut impl Write, label: &Path) -> Result<u64> {
        let mut total = 0u64;
        while let Some(chunk) = self.next_chunk()? {
            writer.write_all(chunk).map_err(|e| Error::io(label, e))?;
            total += chunk.len() as u64;
        }
        Ok(total)
    }
}

impl<R: Read> Read for StreamDecryptor<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.end {
            if self.next_chunk().map_err(io::Error::other)?.is_none() {
                return Ok(0);
            }
            self.pos = 0;
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

// ---------------------------------------------------------------------------------------------
// Random access

/// Where random-access ciphertext comes from.
trait Source {
    fn len(&self) -> u64;
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
}

struct SliceSource<'a>(&'a [u8]);

impl Source for SliceSource<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let piece = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or_else(|| Error::Crypto(format!("truncated: {NAME} data ends early")))?;
        buf.copy_from_slice(piece);
        Ok(())
    }
}

struct FileSource {
    file: File,
    len: u64,
    path: PathBuf,
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        crate::storage::read_exact_at(&self.file, buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Error::Crypto(format!(
                    "truncated: {NAME} file {} shrank while it was read",
                    self.path.display()
                ))
            } else {
                Error::io(&self.path, e)
            }
        })
    }
}

/// Random access to ONNXCRYS data held in a source of known length.
struct Chunked<S: Source> {
    src: S,
    key: ChunkKey,
    chunks: u64,
    len: u64,
}

impl<S: Source> Chunked<S> {
    /// Checks the header and the layout, and authenticates the last chunk (so truncation and
    /// extension are reported here, before any byte is returned).
    fn open(src: S, passphrase: &[u8]) -> Result<Self> {
        Self::open_with(src, &KeyCache::new(passphrase))
    }

    /// As `open`, with the key from `keys`.
    fn open_with(src: S, keys: &KeyCache) -> Result<Self> {
        let total = src.len();
        let mut header = [0u8; HEADER_LEN];
        let n = (total.min(HEADER_LEN as u64)) as usize;
        src.read_exact_at(0, &mut header[..n])?;
        let format = super::EncryptionFormat::detect(&header[..n])?;
        if format != super::EncryptionFormat::Chunked {
            return Err(Error::Crypto(format!("{format} data is not ONNXCRYS data")));
        }
        if n < HEADER_LEN {
            return Err(Error::Crypto(format!(
                "truncated: {NAME} data of {n} bytes is shorter than its {HEADER_LEN}-byte header"
            )));
        }
        // Check the header and the layout before the (slow) key derivation.
        let (_, chunk_size) = check_header(&header)?;
        let (chunks, len) = layout(total - HEADER_LEN as u64, chunk_size)?;
        let key = ChunkKey::with_derived(&keys.key(&header_salt(&header)), header)?;
        let me = Self {
            src,
            key,
            chunks,
            len,
        };
        let last = chunks - 1;
        let mut probe = Zeroizing::new(vec![0u8; me.chunk_len(last)]);
        me.read_chunk_into(last, &mut probe)?;
        Ok(me)
    }

    fn chunk_len(&self, index: u64) -> usize {
        if index + 1 == self.chunks {
            (self.len - index * self.key.chunk_size as u64) as usize
        } else {
            self.key.chunk_size
        }
    }

    /// Reads and opens the whole of chunk `index` into `out` (exactly its length).
    fn read_chunk_into(&self, index: u64, out: &mut [u8]) -> Result<()> {
        debug_assert_eq!(out.len(), self.chunk_len(index));
        let at = HEADER_LEN as u64 + index * (self.key.chunk_size + TAG_LEN) as u64;
        self.src.read_exact_at(at, out)?;
        let mut tag = [0u8; TAG_LEN];
        self.src.read_exact_at(at + out.len() as u64, &mut tag)?;
        self.key.open(index, index + 1 == self.chunks, out, &tag)
    }

    /// Reads `out.len()` plaintext bytes at `offset`, authenticating every chunk it touches.
    fn read_exact_at(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(out.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "read of {} bytes at {offset} past the end of {} bytes of plaintext",
                    out.len(),
                    self.len
                ))
            })?;
        if out.is_empty() {
            return Ok(());
        }
        let cs = self.key.chunk_size as u64;
        let mut done = 0usize;
        for index in offset / cs..=(end - 1) / cs {
            let start = index * cs;
            let len = self.chunk_len(index);
            let a = (offset.max(start) - start) as usize;
            let b = (end.min(start + len as u64) - start) as usize;
            let dst = &mut out[done..done + (b - a)];
            if a == 0 && b == len {
                if let Err(e) = self.read_chunk_into(index, dst) {
                    out.fill(0);
                    return Err(e);
                }
            } else {
                let mut scratch = Zeroizing::new(vec![0u8; len]);
                let r = self.read_chunk_into(index, &mut scratch);
                if r.is_ok() {
                    dst.copy_from_slice(&scratch[a..b]);
                }
                if let Err(e) = r {
                    out.fill(0);
                    return Err(e);
                }
            }
            done += b - a;
        }
        Ok(())
    }

    /// Decrypts everything into one buffer allocated at its final size.
    fn read_all(&self) -> Result<SecretBytes> {
        let len = usize::try_from(self.len).map_err(|_| {
            Error::LimitExceeded(format!("{} bytes do not fit in memory", self.len))
        })?;
        let mut out = SecretBytes::zeroed(len)
            .ok_or_else(|| Error::alloc_failed(len, "the decrypted data"))?;
        self.read_exact_at(0, out.content_mut())?;
        Ok(out)
    }
}

/// Decrypts ONNXCRYS data held in memory.
pub(crate) fn decrypt_slice(data: &[u8], passphrase: &[u8]) -> Result<SecretBytes> {
    Chunked::open(SliceSource(data), passphrase)?.read_all()
}

/// Random, authenticated access to an ONNXCRYS file: reads any range of the plaintext by
/// decrypting only the chunks it covers (e.g. one tensor of an encrypted external-data file).
///
/// Opening checks the header and the file length and authenticates the last chunk, so a
/// truncated or extended file is refused at once; every byte read is authenticated as the
/// original byte at that offset.
pub struct EncryptedFile {
    inner: Chunked<FileSource>,
}

impl EncryptedFile {
    /// Opens `path` (an ONNXCRYS file) with `passphrase`.
    pub fn open(path: impl AsRef<Path>, passphrase: &[u8]) -> Result<Self> {
        super::require_encryption()?;
        let path = path.as_ref();
        let (file, len) = crate::storage::open_regular_file(path)?;
        let src = FileSource {
            file,
            len,
            path: path.to_path_buf(),
        };
        Ok(Self {
            inner: Chunked::open(src, passphrase)?,
        })
    }

    /// Opens an already opened ONNXCRYS file of `len` bytes (`path` names it in errors), with
    /// the key from `keys`.
    pub(crate) fn from_file(file: File, len: u64, path: &Path, keys: &KeyCache) -> Result<Self> {
        let src = FileSource {
            file,
            len,
            path: path.to_path_buf(),
        };
        Ok(Self {
            inner: Chunked::open_with(src, keys)?,
        })
    }

    /// Length of the plaintext.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the plaintext is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The chunk size of the file.
    pub fn chunk_size(&self) -> usize {
        self.inner.key.chunk_size
    }

    /// Reads `out.len()` plaintext bytes at `offset` (an error past the end; `out` is zeroed on
    /// failure).
    ///
    /// Takes `&self`: reads are positional, so any number of threads may read one file at once.
    pub fn read_exact_at(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, out)
    }

    /// Decrypts the whole file into one buffer (zeroed when dropped).
    pub fn read_all(&self) -> Result<SecretBytes> {
        self.inner.read_all()
    }
}

#[cfg(all(test, feature = "encryption"))]
mod tests {
    use super::*;

    #[test]
    fn layout_rules() {
        assert_eq!(layout(16, 64).unwrap(), (1, 0));
        assert_eq!(layout(16 + 63, 64).unwrap(), (1, 63));
        assert_eq!(layout(80 + 16, 64).unwrap(), (2, 64));
        assert!(layout(0, 64).unwrap_err().to_string().contains("truncated"));
        assert!(
            layout(80, 64)
                .unwrap_err()
                .to_string()
                .contains("last chunk")
        );
        assert!(layout(95, 64).unwrap_err().to_string().contains("shorter"));
        assert_eq!(StreamEncryptor::<Vec<u8>>::encrypted_len(0, 64), 36 + 16);
        assert_eq!(
            StreamEncryptor::<Vec<u8>>::encrypted_len(64, 64),
            36 + 64 + 32
        );
    }
}
