//! Writing the planned weight files: each into a temporary file beside its destination
//! (pre-sized, pieces of at most 8 MiB written at their offsets, in parallel with `num_threads`;
//! or through an ONNXCRYS encryptor), with each file's SHA-1 computed from the same bytes when
//! asked for.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::plan::{OutFile, refused};
use crate::error::{Error, Result};
use crate::external::checksum::Sha1Hasher;
use crate::external::options::SaveExternalOptions;
use crate::external::paths::create_beneath;
use crate::external::paths::{OpenError, remove_beneath};
use crate::storage::AtomicFile;
use crate::storage::{Piece, write_pieces};

const PIECE: usize = 8 << 20;

/// The encryption of one save's weight files.
struct Seal<'a> {
    enc: &'a crate::external::options::ExternalEncryption,
    key: &'a crate::crypto::DerivedKey,
    params: &'a crate::crypto::Params,
    /// Index (in the save) of the first file of the batch.
    first: usize,
}

/// Writes every planned file of a batch through an ONNXCRYS encryptor (sequentially per file,
/// files in parallel with `num_threads`): the plaintext is exactly what `write_files` would
/// write (tensors at their offsets, zero padding), so offsets, lengths and checksums are the
/// plaintext's. Memory: one chunk per file being written.
fn write_encrypted_files(
    files: &[OutFile<'_>],
    outs: &[AtomicFile],
    opts: &SaveExternalOptions,
    progress: &Progress<'_>,
    dir: &Path,
    seal: &Seal<'_>,
) -> Result<Vec<Option<String>>> {
    static ZEROS: [u8; 4096] = [0; 4096];
    let write_one = |i: usize| -> Result<Option<String>> {
        let f = &files[i];
        let path = dir.join(&f.rel);
        let mut params = *seal.params;
        let index = u32::try_from(seal.first + i).unwrap_or(u32::MAX);
        params.iv[..4].copy_from_slice(&index.to_be_bytes());
        let mut w = crate::crypto::StreamEncryptor::with_derived(
            outs[i].shared(),
            seal.key,
            seal.enc.cipher,
            seal.enc.chunk_size,
            &params,
        )?;
        w.set_label(&path);
        let mut h = opts.checksum.then(Sha1Hasher::new);
        let mut items = f.items.clone();
        items.sort_by_key(|&(_, off)| off);
        let mut pos = 0u64;
        let mut put = |bytes: &[u8]| -> Result<()> {
            w.write_plaintext(bytes)?;
            if let Some(h) = h.as_mut() {
                h.update(bytes);
            }
            Ok(())
        };
        let zeros = |put: &mut dyn FnMut(&[u8]) -> Result<()>, mut n: u64| -> Result<()> {
            while n > 0 {
                let k = n.min(ZEROS.len() as u64) as usize;
                put(&ZEROS[..k])?;
                n -= k as u64;
            }
            Ok(())
        };
        for (bytes, off) in items {
            // Items never overlap (the planner places them apart).
            zeros(&mut put, off.saturating_sub(pos))?;
            for piece in bytes.chunks(PIECE) {
                put(piece)?;
                if let Some(p) = progress.report {
                    let n = piece.len() as u64;
                    p(
                        progress.done.fetch_add(n, Ordering::Relaxed) + n,
                        progress.total,
                    );
                }
            }
            pos = pos.max(off + bytes.len() as u64);
        }
        zeros(&mut put, f.size - pos)?;
        w.finish()?;
        Ok(h.map(Sha1Hasher::finish_hex))
    };
    let threads = opts.threads();
    let pool = if threads > 1 && files.len() > 1 {
        crate::storage::thread_pool(threads)
    } else {
        None
    };
    match pool {
        Some(pool) => {
            use crate::storage::par::prelude::*;
            pool.install(|| (0..files.len()).into_par_iter().map(write_one).collect())
        }
        None => (0..files.len()).map(write_one).collect(),
    }
}

/// Weight files open at once while saving (each holds two descriptors).
const OPEN_FILES: usize = 32;

/// Progress of the weight writes.
struct Progress<'a> {
    done: AtomicU64,
    total: u64,
    report: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// Writes every planned file into its temporary file (pre-sized; pieces of at most 8 MiB written
/// at their offsets, in parallel with `num_threads`), and computes each file's SHA-1 from the
/// same bytes (padding included) when `checksum` is set.
fn write_files(
    files: &[OutFile<'_>],
    outs: &[AtomicFile],
    opts: &SaveExternalOptions,
    progress: &Progress<'_>,
    dir: &Path,
) -> Result<Vec<Option<String>>> {
    let mut pieces: Vec<Piece<'_>> = Vec::new();
    // The weight file of each piece.
    let mut file_of: Vec<usize> = Vec::new();
    for (i, (f, out)) in files.iter().zip(outs).enumerate() {
        crate::storage::presize(out.shared(), f.size)
            .map_err(|e| Error::io(dir.join(&f.rel), e))?;
        for &(bytes, offset) in &f.items {
            for (k, bytes) in bytes.chunks(PIECE).enumerate() {
                pieces.push(Piece {
                    file: out.shared(),
                    offset: offset + (k * PIECE) as u64,
                    bytes,
                });
                file_of.push(i);
            }
        }
    }
    let written = |i: usize| {
        if let Some(p) = progress.report {
            let n = pieces[i].bytes.len() as u64;
            p(
                progress.done.fetch_add(n, Ordering::Relaxed) + n,
                progress.total,
            );
        }
    };
    let write = |pool: Option<&crate::storage::par::ThreadPool>| -> Result<()> {
        write_pieces(&pieces, pool, &written)
            .map(drop)
            .map_err(|(i, e)| Error::io(dir.join(&files[file_of[i]].rel), e))
    };
    let hash = || -> Vec<Option<String>> {
        files
            .iter()
            .map(|f| {
                opts.checksum.then(|| {
                    let mut items = f.items.clone();
                    items.sort_by_key(|&(_, off)| off);
                    let mut h = Sha1Hasher::new();
                    let mut pos = 0u64;
                    for (bytes, off) in items {
                        h.update_zeros(off.saturating_sub(pos));
                        h.update(bytes);
                        pos = pos.max(off + bytes.len() as u64);
                    }
                    h.update_zeros(f.size - pos);
                    h.finish_hex()
                })
            })
            .collect()
    };
    let threads = opts.threads();
    let pool = if threads > 1 {
        crate::storage::thread_pool(threads)
    } else {
        None
    };
    match pool {
        Some(pool) => {
            let (written, digests) =
                pool.install(|| crate::storage::par::join(|| write(Some(&pool)), hash));
            written?;
            Ok(digests)
        }
        None => {
            write(None)?;
            Ok(hash())
        }
    }
}

/// Weight files renamed into place by a save whose model is not committed yet; dropped, it
/// removes them (the save failed or panicked: no model references them).
pub(crate) struct PlacedFiles<'d> {
    dir: &'d Path,
    rels: Vec<PathBuf>,
}

impl PlacedFiles<'_> {
    /// The model that references the files is committed: they stay.
    pub(crate) fn keep(mut self) {
        self.rels.clear();
    }
}

impl Drop for PlacedFiles<'_> {
    fn drop(&mut self) {
        for rel in &self.rels {
            remove_beneath(self.dir, rel);
        }
    }
}

/// Writes every planned weight file under its first-commit name, in batches (so a model with
/// thousands of per-tensor files never holds more than a few descriptors): each file is written
/// to a temporary file, synced (with `opts.sync`) and renamed into place. Returns the SHA-1 of
/// each file (with `opts.checksum`) and the files in place, which are removed again unless the
/// caller keeps them once the model is committed.
pub(crate) fn write_weight_files<'d>(
    files: &[OutFile<'_>],
    dir: &'d Path,
    opts: &SaveExternalOptions,
    report: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<(Vec<Option<String>>, PlacedFiles<'d>)> {
    let err = |f: &OutFile<'_>, e: OpenError| match e {
        OpenError::Refused(r) => refused(&f.location, format!("save: {r}")),
        OpenError::Io(e) => Error::io(dir.join(&f.rel), e),
    };
    let progress = Progress {
        done: AtomicU64::new(0),
        total: files
            .iter()
            .flat_map(|f| &f.items)
            .map(|(b, _)| b.len() as u64)
            .sum(),
        report,
    };
    // Encrypted weight files share one random salt (one key derivation per save) and have
    // distinct nonce prefixes (their index), so no (key, nonce) pair is ever used twice.
    let sealing = match &opts.encryption {
        Some(e) => {
            if u32::try_from(files.len()).is_err() {
                return Err(Error::LimitExceeded(
                    "more than 2^32 encrypted weight files".into(),
                ));
            }
            let params = crate::crypto::Params::random()?;
            let key = crate::crypto::derive_key(e.key.as_bytes(), &params.salt);
            Some((e, key, params))
        }
        None => None,
    };
    let mut digests = Vec::with_capacity(files.len());
    let mut placed = PlacedFiles {
        dir,
        rels: Vec::with_capacity(files.len()),
    };
    for (b, batch) in files.chunks(OPEN_FILES).enumerate() {
        let outs = batch
            .iter()
            .map(|f| create_beneath(dir, &f.rel, opts.sync).map_err(|e| err(f, e)))
            .collect::<Result<Vec<_>>>()?;
        digests.extend(match &sealing {
            None => write_files(batch, &outs, opts, &progress, dir)?,
            Some((e, key, params)) => {
                let seal = Seal {
                    enc: e,
                    key,
                    params,
                    first: b * OPEN_FILES,
                };
                write_encrypted_files(batch, &outs, opts, &progress, dir, &seal)?
            }
        });
        for (out, f) in outs.into_iter().zip(batch) {
            out.commit()?;
            placed.rels.push(f.rel.clone());
        }
    }
    Ok((digests, placed))
}
