//! External data of a remote model: every location obeys the path rules and resolves under the
//! model's own prefix on the same store (never another bucket or host); each weight file's size
//! and version are read once and pinned; every range is checked against its file before
//! anything is allocated; then all ranges are fetched concurrently straight into their aligned
//! homes in one region, which their tensors own (no temporary file, no second copy).

use std::collections::HashMap;
use std::sync::Arc;

use super::fetch::{Object, read_many};
use super::{Location, RemoteOptions, block_on};
use crate::bytes::{ByteSpan, Owner};
use crate::error::{Error, Result};
use crate::external::LoadOptions;
use crate::external::{
    DATA_LOCATION_DEFAULT, ExternalDataInfo, checksum_matches as matches, normalize_location,
    sha1_hex, uses_external_data,
};
use crate::mem::ReusableMap;
use crate::proto::ModelProto;

fn ext_err(tensor: &str, url: &str, reason: impl Into<String>) -> Error {
    Error::ExternalData {
        tensor: tensor.to_string(),
        path: url.into(),
        reason: reason.into(),
    }
}

/// One external tensor, resolved: (visitor index, name, file, offset, length, checksum).
struct Ref {
    index: usize,
    tensor: String,
    file: usize,
    offset: u64,
    len: u64,
    checksum: Option<String>,
}

/// The owner of the loaded bytes.
struct Region(#[allow(dead_code)] ReusableMap);

/// Loads the external data of `model`, read from `model_loc`'s store (see the module doc).
/// On error the model is unchanged.
pub(crate) fn load(
    model: &mut ModelProto,
    model_loc: &Location,
    opts: &LoadOptions,
    ro: &RemoteOptions,
) -> Result<()> {
    let mut pending = Vec::new();
    let mut index = 0usize;
    model.visit_tensors(&mut |t| {
        if uses_external_data(t) {
            let name = t.name().to_string_lossy().into_owned();
            pending.push((index, name, ExternalDataInfo::parse(t)));
        }
        index += 1;
    });
    if pending.is_empty() {
        return Ok(());
    }
    // Files, in order of first use.
    let mut locs: Vec<Location> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let mut refs = Vec::new();
    for (index, tensor, info) in pending {
        let info = info.map_err(|reason| ext_err(&tensor, &model_loc.url, reason))?;
        let rel = normalize_location(&info.location).map_err(|reason| Error::PathRefused {
            path: info.location.clone().into(),
            reason: format!("location of tensor '{tensor}': {reason}"),
        })?;
        let loc = model_loc.sibling(&rel)?;
        let file = *by_key.entry(loc.key.to_string()).or_insert_with(|| {
            locs.push(loc);
            locs.len() - 1
        });
        refs.push((index, tensor, file, info));
    }
    let heads: Vec<_> = locs.iter().map(Object::head_async).collect();
    let files: Vec<Object> = block_on(async {
        use futures_util::StreamExt;
        futures_util::stream::iter(heads)
            .buffered(ro.concurrency)
            .collect::<Vec<_>>()
            .await
    })?
    .into_iter()
    .collect::<Result<_>>()?;
    refuse_encrypted(&files, ro)?;
    let refs = refs
        .into_iter()
        .map(|(index, tensor, file, info)| {
            let f = &files[file];
            let size = f.size;
            let len = info.length.unwrap_or(size.saturating_sub(info.offset));
            if info.offset.checked_add(len).is_none_or(|end| end > size) {
                return Err(ext_err(
                    &tensor,
                    &f.loc.url,
                    format!(
                        "offset {} + length {len} runs past the end of the object ({size} bytes)",
                        info.offset
                    ),
                ));
            }
            if opts.parse.max_tensor_size_bytes > 0 && len > opts.parse.max_tensor_size_bytes {
                return Err(Error::LimitExceeded(format!(
                    "external data of tensor '{tensor}' ({len} bytes in {}) exceeds \
                     max_tensor_size_bytes {}",
                    f.loc.url, opts.parse.max_tensor_size_bytes
                )));
            }
            Ok(Ref {
                index,
                tensor,
                file,
                offset: info.offset,
                len,
                checksum: info.checksum,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if opts.verify_external_checksums {
        verify_checksums(&refs, &files, ro)?;
    }
    // One home per distinct range (tensors naming one range share it: a small model cannot make
    // a load fetch one range many times over).
    let align = opts.parse.payload_alignment().max(64);
    let mut first: HashMap<(usize, u64, u64), usize> = HashMap::new();
    let mut unique: Vec<(usize, u64)> = Vec::new(); // (ref, start in the region)
    let mut home_of = Vec::with_capacity(refs.len());
    let mut total = 0u64;
    for (i, r) in refs.iter().enumerate() {
        let u = *first.entry((r.file, r.offset, r.len)).or_insert_with(|| {
            let start = total.next_multiple_of(align);
            total = start + r.len;
            unique.push((i, start));
            unique.len() - 1
        });
        home_of.push(u);
    }
    let total_usize = usize::try_from(total).map_err(|_| {
        Error::LimitExceeded(format!(
            "{total} bytes of external data do not fit in memory"
        ))
    })?;
    let mut region = ReusableMap::new(total_usize.max(1))
        .map_err(|_| Error::alloc_failed(total, "the external data"))?;
    {
        let mut pieces = Vec::with_capacity(unique.len());
        let mut rest: &mut [u8] = &mut region;
        let mut consumed = 0usize;
        for &(i, start) in &unique {
            let r = &refs[i];
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(start as usize - consumed);
            let (dst, tail) = tail.split_at_mut(r.len as usize);
            rest = tail;
            consumed = start as usize + r.len as usize;
            pieces.push((&files[r.file], r.offset, dst));
        }
        read_many(pieces, ro)?;
    }
    let base = region.as_mut_ptr();
    let owner: Owner = Arc::new(Region(region));
    let mut spans: Vec<ByteSpan> = unique
        .iter()
        .map(|&(i, start)| {
            // SAFETY: `start..start+len` lies inside the region (sized above), the ranges are
            // pairwise disjoint, the region is writable and kept alive by `owner`, and no other
            // reference to it remains (the pieces are gone).
            unsafe {
                ByteSpan::from_arena_range(
                    base.add(start as usize),
                    refs[i].len as usize,
                    owner.clone(),
                )
            }
        })
        .collect();
    let shared = spans.len() != refs.len();
    if shared {
        for s in &mut spans {
            s.share();
        }
    }
    let mut slots: HashMap<usize, ByteSpan> = refs
        .iter()
        .zip(&home_of)
        .map(|(r, &u)| {
            (
                r.index,
                if shared {
                    spans[u].clone()
                } else {
                    std::mem::take(&mut spans[u])
                },
            )
        })
        .collect();
    let mut index = 0usize;
    model.visit_tensors_mut(&mut |t| {
        if let Some(span) = slots.remove(&index) {
            t.raw_data = Some(span);
            t.rare.external_data.clear();
            t.rare.data_location = Some(DATA_LOCATION_DEFAULT);
        }
        index += 1;
    });
    Ok(())
}

/// Encrypted weight files (`ONNXCRY*`) are not read remotely: refused by their magic, never
/// loaded as if they were plaintext.
fn refuse_encrypted(files: &[Object], ro: &RemoteOptions) -> Result<()> {
    let mut heads = vec![[0u8; 7]; files.len()];
    let pieces = files
        .iter()
        .zip(&mut heads)
        .filter(|(f, _)| f.size >= 7)
        .map(|(f, h)| (f, 0, &mut h[..]))
        .collect();
    read_many(pieces, ro)?;
    for (f, h) in files.iter().zip(&heads) {
        if f.size >= 7 && h == b"ONNXCRY" {
            return Err(Error::Unsupported(format!(
                "{} is an encrypted weight file: encrypted weights are read from local files only",
                f.loc.url
            )));
        }
    }
    Ok(())
}

/// Verifies the `checksum` entries (SHA-1 of the whole object), each object read once.
fn verify_checksums(refs: &[Ref], files: &[Object], ro: &RemoteOptions) -> Result<()> {
    let mut digests: HashMap<usize, String> = HashMap::new();
    for r in refs {
        let Some(recorded) = &r.checksum else {
            continue;
        };
        let f = &files[r.file];
        let digest = match digests.entry(r.file) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(sha1_hex(f.read_whole(ro)?.as_ref()))
            }
        };
        if !matches(recorded, digest) {
            return Err(ext_err(
                &r.tensor,
                &f.loc.url,
                format!("checksum mismatch: recorded SHA-1 {recorded}, the object has {digest}"),
            ));
        }
    }
    Ok(())
}
