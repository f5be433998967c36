//! Committing a save: the `.onnx` is written from a copy of the model's METADATA with the new
//! external references (no payload copied) and renamed over the old one — the commit point.
//! Weight files written under alternate names (their wanted name was in use by the replaced
//! model) then move to the names the user asked for, crash-safe, in a second commit:
//!
//! 1. the wanted name becomes a second hard link of the new file (atomically replacing the old
//!    file of that name, which no committed model references any more);
//! 2. the `.onnx` is rewritten with the wanted names and renamed into place;
//! 3. the alternate name is removed.
//!
//! A kill at any step leaves the model of the first or the second commit, each with all its
//! files (between 1 and 3 a weight file has two links, both in the model's directory, which the
//! loader accepts). Where the file system has no hard links the alternate names stay. Last, the
//! replaced model's files of this save's name family that the new model does not reference are
//! removed.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::plan::{Plan, Previous, Unloaded};
use crate::bytes::ByteSpan;
use crate::codec::SerializeOptions;
use crate::error::Result;
use crate::external::info::{DATA_LOCATION_DEFAULT, ExternalDataInfo, uses_external_data};
use crate::external::options::SaveExternalOptions;
use crate::external::paths::{link_over, normalize_location, remove_beneath};
use crate::proto::{ModelProto, TensorProto};

/// What the commit phase needs.
pub(crate) struct CommitInput<'a> {
    pub(crate) model: &'a ModelProto,
    pub(crate) path: &'a Path,
    pub(crate) dir: &'a Path,
    pub(crate) model_name: &'a str,
    pub(crate) opts: &'a SaveExternalOptions,
    pub(crate) model_encryption: Option<&'a crate::crypto::EncryptionOptions>,
    pub(crate) unloaded: &'a Unloaded,
    pub(crate) previous: &'a Previous,
}

/// The copy of `model`'s metadata that the `.onnx` is written from: planned tensors reference
/// their weight file, tensors still external in memory that stay inline get their bytes, and
/// payloads in memory are borrowed (not copied).
fn metadata_copy(
    model: &ModelProto,
    plan: &mut Plan<'_>,
    digests: &[Option<String>],
    unloaded: &Unloaded,
) -> ModelProto {
    let Plan {
        files,
        placements,
        blob_entries,
        ..
    } = plan;
    model.clone_with_tensors(&mut |t| {
        let mut c = t.clone_without_payload();
        let key = t as *const TensorProto;
        if let Some(p) = placements.get(&key) {
            ExternalDataInfo {
                location: files[p.file].location.clone(),
                offset: p.offset,
                length: Some(p.len),
                checksum: digests[p.file].clone(),
                prepacked: blob_entries.remove(&key).unwrap_or_default(),
                ..Default::default()
            }
            .apply_to(&mut c);
        } else if let Some(span) = unloaded.get(&key) {
            // Still external in memory, small enough to go inline now.
            c.raw_data = Some(ByteSpan::from_vec(span.to_vec()));
            c.rare.external_data.clear();
            c.rare.data_location = Some(DATA_LOCATION_DEFAULT);
        } else if let Some(r) = &t.raw_data {
            // SAFETY: the copy lives only inside the commit phase, while `model` (which keeps
            // these bytes alive and unchanged) is borrowed; the span is dropped with the copy.
            c.raw_data = Some(unsafe { ByteSpan::from_raw_parts(r.as_ptr(), r.len()) });
            if uses_external_data(t) {
                // Bytes in memory win over stale external metadata.
                c.rare.external_data.clear();
                c.rare.data_location = Some(DATA_LOCATION_DEFAULT);
            }
        }
        c
    })
}

/// Writes `copy` to `path` atomically (temporary file, sync when `opts.sync`, rename),
/// encrypted when asked.
fn write_model(copy: &ModelProto, input: &CommitInput<'_>) -> Result<()> {
    let sync = input.opts.sync;
    match (input.model_encryption, &input.opts.encryption) {
        (Some(me), Some(e)) => {
            crate::crypto::save_encrypted_model_with(copy, input.path, e.key.as_bytes(), me, sync)
        }
        // The save holds the destination's lock already.
        _ => crate::codec::save_to_file_locked(
            copy,
            input.path,
            &SerializeOptions {
                num_threads: input.opts.num_threads,
                ..SerializeOptions::default()
            },
            sync,
        ),
    }
}

/// Commits the planned save whose weight files are in place (`keep_files` is called once the
/// model that references them is committed). Returns the final location of each file.
pub(crate) fn commit(
    input: &CommitInput<'_>,
    plan: &mut Plan<'_>,
    digests: &[Option<String>],
    keep_files: impl FnOnce(),
) -> Result<Vec<String>> {
    let mut copy = metadata_copy(input.model, plan, digests, input.unloaded);
    // The commit point: every weight file is in place (synced, under a name the previous
    // model does not use); renaming the new model over the old one switches atomically.
    write_model(&copy, input)?;
    keep_files();
    let mut finals: Vec<String> = plan.files.iter().map(|f| f.location.clone()).collect();

    // The second commit: weight files under alternate names move to the wanted names.
    let model_lower = input.model_name.to_ascii_lowercase();
    let moves: Vec<usize> = (0..plan.files.len())
        .filter(|&i| {
            let f = &plan.files[i];
            f.rel != f.wanted
                && super::plan::location_string(&f.wanted).to_ascii_lowercase() != model_lower
        })
        .collect();
    if !moves.is_empty() {
        let mut linked = Vec::new();
        for &i in &moves {
            let f = &plan.files[i];
            match link_over(input.dir, &f.rel, &f.wanted, input.opts.sync) {
                Ok(()) => linked.push(i),
                Err(_) => break,
            }
        }
        if linked.len() == moves.len() {
            let renamed: HashMap<String, String> = moves
                .iter()
                .map(|&i| {
                    let f = &plan.files[i];
                    (f.location.clone(), super::plan::location_string(&f.wanted))
                })
                .collect();
            copy.visit_tensors_mut(&mut |t| {
                // Only tensors with external data have entries (and a rare box to hold them).
                let Some(rare) = t.rare.get_mut() else { return };
                for e in rare.external_data.iter_mut() {
                    if e.key.as_ref().and_then(|k| k.as_str()) == Some("location")
                        && let Some(new) = e
                            .value
                            .as_ref()
                            .and_then(|v| v.as_str())
                            .and_then(|v| renamed.get(v))
                    {
                        e.value = Some(new.as_str().into());
                    }
                }
            });
            write_model(&copy, input)?;
            for &i in &moves {
                remove_beneath(input.dir, &plan.files[i].rel);
                finals[i] = super::plan::location_string(&plan.files[i].wanted);
            }
        } else {
            // No hard links here: the first commit stands with the alternate names; the
            // wanted names made so far are extra links of files it references.
            for &i in &linked {
                remove_beneath(input.dir, &plan.files[i].wanted);
            }
        }
    }
    drop(copy);

    // Files of the previous model in this save's naming family that the new model does not
    // reference (what an in-place save would have overwritten).
    let kept: HashSet<String> = finals.iter().map(|l| l.to_ascii_lowercase()).collect();
    for (lower, original) in &input.previous.refs {
        if !kept.contains(lower)
            && plan.family.contains(lower)
            && let Ok(rel) = normalize_location(original)
        {
            remove_beneath(input.dir, &rel);
        }
    }
    Ok(finals)
}

/// Removes what killed saves left in the directory of this save's weight files: members of its
/// name family that the model being replaced does not reference — alternates and split parts,
/// and a wanted name that is a second link of another member (an unfinished second commit).
/// Other files under a wanted name are left to the destination checks. Nothing is removed when
/// the replaced model's references are unknown (an encrypted model this save cannot read).
pub(crate) fn remove_strays(dir: &Path, plan: &Plan<'_>, previous: &Previous, model_name: &str) {
    if previous.unknown {
        return;
    }
    let sub = plan.family.subdir();
    let Ok(entries) = std::fs::read_dir(dir.join(&sub)) else {
        return;
    };
    let model_lower = model_name.to_ascii_lowercase();
    let wanted: HashSet<String> = plan
        .files
        .iter()
        .map(|f| super::plan::location_string(&f.wanted).to_ascii_lowercase())
        .collect();
    // Family members: (relative path, lower-case location, file identity).
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let rel = sub.join(entry.file_name());
        let lower = super::plan::location_string(&rel).to_ascii_lowercase();
        if lower == model_lower || !plan.family.contains(&lower) {
            continue;
        }
        // `DirEntry::metadata` does not follow a symbolic link.
        if let Ok(meta) = entry.metadata()
            && meta.is_file()
        {
            members.push((rel, lower, file_id(&meta)));
        }
    }
    for (rel, lower, id) in &members {
        if previous.refs.contains_key(lower) {
            continue;
        }
        let linked_member = id.is_some()
            && members
                .iter()
                .any(|(_, other, other_id)| other != lower && other_id == id);
        if !wanted.contains(lower) || linked_member {
            remove_beneath(dir, rel);
        }
    }
}

/// The identity (device, inode) of a file, where the platform has one.
fn file_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}
