//! Path safety of external data, on load AND on save.
//!
//! | rule | advisory |
//! |---|---|
//! | empty or absolute location (leading `/` or `\`, drive letter, `:`) refused | CVE-2022-25882 |
//! | `..` left after lexical normalisation refused | CVE-2022-25882, CVE-2024-27318 |
//! | symbolic links (final component AND every parent) and non-regular files refused | CVE-2026-34447 |
//! | canonical containment: the opened file must lie inside the model directory | CVE-2026-27489 |
//! | files with more than one hard link refused | CVE-2026-34446 |
//! | the same rules on save: nothing is written outside the target directory | CVE-2025-51480 |
//! | the ONNX Runtime tag `*/_ORT_MEM_ADDR_/*` is never honoured from a file | — |
//!
//! Opening is race-free on Linux: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` relative to the directory's descriptor, falling back (old kernels,
//! seccomp) to a component-by-component walk with `O_NOFOLLOW`; both with `O_CLOEXEC`, and
//! `O_NONBLOCK` so that a FIFO cannot block the open. The type, link count and canonical location
//! are then checked on the opened descriptor itself. Saving walks the same way, creates the
//! temporary file with `O_EXCL | O_NOFOLLOW` in the checked directory and renames it there.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::storage::AtomicFile;
#[cfg(any(unix, windows))]
use crate::storage::atomic::temp_owner;

/// Why a file could not be opened: a refusal by a rule, or an ordinary I/O failure.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// A path-safety rule refused the path.
    Refused(String),
    /// The file system said no (not found, permission, ...).
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        OpenError::Io(e)
    }
}

/// The ONNX Runtime tag for "the bytes are at a raw memory address" (never honoured from a file).
pub const ORT_MEM_ADDR_TAG: &str = "_ORT_MEM_ADDR_";

/// Checks an external-data `location` lexically and returns its normalised relative form
/// (`a/./b` → `a/b`, `a/../b` → `b`). `/` and `\` both separate components, on every platform.
///
/// Refused: empty; NUL bytes; absolute paths (leading `/` or `\`), drive letters and any `:`
/// (drive or NTFS stream separator); a `..` that remains after normalisation (it would leave the
/// directory); a location naming the directory itself; the `_ORT_MEM_ADDR_` tag.
pub fn normalize_location(location: &str) -> Result<PathBuf, String> {
    if location.is_empty() {
        return Err("empty location".into());
    }
    if location.contains('\0') {
        return Err("location contains a NUL byte".into());
    }
    if location.contains(ORT_MEM_ADDR_TAG) {
        return Err(format!(
            "the ONNX Runtime in-memory address tag */{ORT_MEM_ADDR_TAG}/* is never honoured \
             from a file"
        ));
    }
    if location.starts_with('/') || location.starts_with('\\') {
        return Err(
            "absolute path (only paths relative to the model directory are allowed)".into(),
        );
    }
    let b = location.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(
            "drive-letter path (only paths relative to the model directory are allowed)".into(),
        );
    }
    if location.contains(':') {
        return Err("':' (drive or stream separator) is not allowed in a location".into());
    }
    let mut parts: Vec<&str> = Vec::new();
    for comp in location.split(['/', '\\']) {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("'..' leaves the model directory".into());
                }
            }
            c => {
                if cfg!(windows)
                    && let Some(problem) = windows_name_problem(c)
                {
                    return Err(problem);
                }
                parts.push(c)
            }
        }
    }
    if parts.is_empty() {
        return Err("location names the model directory itself, not a file".into());
    }
    Ok(parts.iter().collect())
}

/// Why `name` (one component of a location) does not name a file of its own on Windows, if it
/// does not (checked by [`normalize_location`] on Windows; `\\`, `/` and `:` are refused before):
/// a reserved device name (`CON`, `PRN`, `AUX`, `NUL`, `COM0`..`COM9`, `LPT0`..`LPT9` and their
/// superscript-digit forms, `CONIN$`, `CONOUT$`), with or without an extension and in any case,
/// which opens the device instead of a file; a trailing `.` or space, which Windows strips (so
/// `w.bin.` would be `w.bin`, and `.. ` would be `..`); a character Windows refuses in names
/// (`< > " | ? *` and control characters).
pub fn windows_name_problem(name: &str) -> Option<String> {
    if name.ends_with(['.', ' ']) {
        return Some(format!(
            "'{name}' ends with '.' or a space (Windows drops them, so it would name another file)"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*') || c < ' ')
    {
        return Some(format!(
            "'{}' contains {c:?}, which Windows does not allow in a file name",
            name.escape_debug()
        ));
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or_default()
        .trim_end_matches(' ');
    let upper = stem.to_uppercase();
    let numbered = |prefix: &str| {
        upper.strip_prefix(prefix).is_some_and(|d| {
            let mut chars = d.chars();
            matches!(
                (chars.next(), chars.next()),
                (Some('0'..='9' | '¹' | '²' | '³'), None)
            )
        })
    };
    let reserved = matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || numbered("COM")
        || numbered("LPT");
    reserved.then(|| format!("'{name}' is a reserved device name on Windows ({stem}), not a file"))
}

/// The directory of a model file (`.` for a bare file name).
pub fn model_dir(model_path: &Path) -> PathBuf {
    match model_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// An external data file opened for reading under every rule, with its size.
pub(crate) struct SafeFile {
    pub(crate) file: File,
    pub(crate) len: u64,
}

/// Opens `rel` (a normalised location) for reading beneath `dir`, under every rule.
pub(crate) fn open_beneath(dir: &Path, rel: &Path) -> Result<SafeFile, OpenError> {
    debug_assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
    let file = imp::open_beneath(dir, rel)?;
    let meta = file.metadata()?;
    check_opened(&meta, || links_all_beside(dir, rel, &meta))?;
    check_containment(dir, &file, rel)?;
    Ok(SafeFile {
        len: meta.len(),
        file,
    })
}

/// Type and link-count rules on an opened file. A file with several hard links is refused
/// unless `all_links_inside()` says that every one of them is in the model's directory (a save
/// moving a weight file to its final name holds two links for a moment, see
/// [`link_over`]): then no link leads outside.
fn check_opened(
    meta: &std::fs::Metadata,
    all_links_inside: impl FnOnce() -> bool,
) -> Result<(), OpenError> {
    if !meta.file_type().is_file() {
        return Err(OpenError::Refused(
            "not a regular file (directory, FIFO, socket or device)".into(),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 && !all_links_inside() {
            return Err(OpenError::Refused(format!(
                "the file has {} hard links (a hard link can point outside the model directory)",
                meta.nlink()
            )));
        }
    }
    // Elsewhere the link count is checked on the handle (`imp::open_beneath`).
    #[cfg(not(unix))]
    let _ = all_links_inside;
    Ok(())
}

/// Directory entries read at most when looking for the other links of a file.
#[cfg(any(unix, windows))]
const MAX_LINK_SCAN: usize = 1 << 16;

/// Whether every hard link of the file `rel` (whose metadata is `meta`) is an entry of its own
/// directory beneath `dir` (entries are not followed; at most [`MAX_LINK_SCAN`] are read, and
/// at most two links are accepted).
fn links_all_beside(dir: &Path, rel: &Path, meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() != 2 {
            return false;
        }
        let sub = dir.join(rel.parent().unwrap_or(Path::new("")));
        let Ok(entries) = std::fs::read_dir(sub) else {
            return false;
        };
        let mut found = 0u64;
        for entry in entries.take(MAX_LINK_SCAN).flatten() {
            // `DirEntry::metadata` does not follow a symbolic link.
            if let Ok(m) = entry.metadata()
                && m.dev() == meta.dev()
                && m.ino() == meta.ino()
            {
                found += 1;
            }
        }
        found == meta.nlink()
    }
    #[cfg(not(unix))]
    {
        let _ = (dir, rel, meta);
        false
    }
}

/// Gives the file `from` a second name `to` (normalised locations beneath `dir`, in the same
/// directory), replacing whatever `to` was atomically: a hard link under a temporary name,
/// renamed over `to`. The two names then share one file until `from` is removed. Fails (and
/// changes nothing) where the file system has no hard links.
pub(crate) fn link_over(dir: &Path, from: &Path, to: &Path, sync: bool) -> io::Result<()> {
    if from.parent() != to.parent() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "link_over: the names are in different directories",
        ));
    }
    imp::link_over(dir, from, to, sync)
}

/// Canonical containment: the file actually opened lies inside `dir`.
fn check_containment(dir: &Path, file: &File, rel: &Path) -> Result<(), OpenError> {
    let canon_dir = dir.canonicalize()?;
    let actual = imp::fd_path(file).or_else(|_| dir.join(rel).canonicalize())?;
    if actual.starts_with(&canon_dir) && actual != canon_dir {
        Ok(())
    } else {
        Err(OpenError::Refused(format!(
            "resolves to {}, outside the model directory {}",
            actual.display(),
            canon_dir.display()
        )))
    }
}

/// Checks `rel` (a normalised location) beneath `dir` for writing and creates its temporary
/// file: the weight file's [`AtomicFile`], committed with `sync` or not. Missing parent
/// directories inside `dir` are created. Refused: a symbolic link on the way or at the
/// destination, a destination that is not a regular file or has more than one hard link, a
/// directory outside `dir`.
pub(crate) fn create_beneath(dir: &Path, rel: &Path, sync: bool) -> Result<AtomicFile, OpenError> {
    debug_assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
    let (parent, name) = imp::prepare_write(dir, rel)?;
    Ok(AtomicFile::create_in(parent, &name, dir.join(rel), sync)?)
}

/// Checks (and creates the parent directories of) a destination like [`create_beneath`]
/// without creating anything else or keeping a descriptor open.
pub(crate) fn check_writable(dir: &Path, rel: &Path) -> Result<(), OpenError> {
    imp::prepare_write(dir, rel).map(drop)
}

/// Removes the regular file `rel` (a normalised location) beneath `dir`, walking the parents
/// like a save does (no link followed); best effort (errors are ignored).
pub(crate) fn remove_beneath(dir: &Path, rel: &Path) {
    debug_assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
    imp::remove_beneath(dir, rel);
}

/// Removes the temporary files (`.NAME.tmp-PID-N`, made by this library's saves) that saves
/// killed before they finished left in the directories of the files `rels` (normalised
/// locations beneath `dir`): only those whose process no longer exists (Unix and Windows;
/// elsewhere nothing is removed). Best effort.
pub(crate) fn remove_stale_temps(dir: &Path, rels: &[PathBuf]) {
    imp::remove_stale_temps(dir, rels);
}

/// The temporary files of other processes in the directories of the files `rels` (normalised
/// locations beneath `dir`): per directory, one of its files' location and the (name, process
/// id) of each such file there.
#[cfg(any(unix, windows))]
fn temps_of_others<'a>(dir: &Path, rels: &'a [PathBuf]) -> Vec<(&'a Path, Vec<(OsString, u32)>)> {
    let me = std::process::id();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for rel in rels {
        let sub = rel.parent().unwrap_or(Path::new(""));
        if !seen.insert(sub) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let temps: Vec<_> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let pid = temp_owner(&name)?;
                (pid != me).then_some((name, pid))
            })
            .collect();
        if !temps.is_empty() {
            out.push((rel.as_path(), temps));
        }
    }
    out
}

fn file_name_of(rel: &Path) -> io::Result<OsString> {
    rel.file_name()
        .map(|n| n.to_os_string())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))
}

#[cfg(unix)]
mod imp {
    use super::{OpenError, file_name_of};
    use crate::storage::atomic::{
        Temp, cstr, open_dir, openat, rename_or_remove, unless_taken, with_free_temp,
    };
    use std::ffi::{CString, OsStr};
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "linux")]
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::path::{Component, Path, PathBuf};

    /// Maps the errors of a no-follow open to refusals where a rule was hit.
    fn classify(e: io::Error, what: &str) -> OpenError {
        match e.raw_os_error() {
            Some(libc::ELOOP) => OpenError::Refused(format!(
                "{what} is or passes through a symbolic link (links are never followed)"
            )),
            Some(libc::EXDEV) => {
                OpenError::Refused(format!("{what} resolves outside the model directory"))
            }
            // open(2) of a UNIX socket.
            Some(libc::ENXIO) => {
                OpenError::Refused(format!("{what} is not a regular file (socket or device)"))
            }
            _ => OpenError::Io(e),
        }
    }

    const READ_FLAGS: i32 = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;

    #[cfg(target_os = "linux")]
    fn openat2_beneath(dir: &File, rel: &Path) -> Option<io::Result<File>> {
        let c = match cstr(rel.as_os_str()) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: `open_how` is plain integers; all-zero is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = READ_FLAGS as u64;
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: openat2(2) with a live directory descriptor, a NUL-terminated path and a
        // properly sized `open_how` that outlives the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // Not available (old kernel, seccomp filter): use the portable walk.
                Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EINVAL) => None,
                _ => Some(Err(e)),
            };
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Some(Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) })))
    }

    /// Walks the parent components of `rel` from `dir` without following links; `create`
    /// makes missing directories.
    fn walk_parents(dir: &Path, rel: &Path, create: bool) -> Result<File, OpenError> {
        let mut cur = open_dir(dir)?;
        let comps: Vec<_> = rel.components().collect();
        for comp in &comps[..comps.len().saturating_sub(1)] {
            let Component::Normal(name) = comp else {
                return Err(OpenError::Refused("not a normalised relative path".into()));
            };
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            cur = match openat(&cur, name, flags, 0) {
                Ok(f) => f,
                Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                    let c = cstr(name)?;
                    // SAFETY: live directory descriptor and NUL-terminated name.
                    if unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                        let e = io::Error::last_os_error();
                        if e.raw_os_error() != Some(libc::EEXIST) {
                            return Err(OpenError::Io(e));
                        }
                    }
                    openat(&cur, name, flags, 0).map_err(|e| classify_dir(e, name))?
                }
                Err(e) => return Err(classify_dir(e, name)),
            };
        }
        Ok(cur)
    }

    fn classify_dir(e: io::Error, name: &OsStr) -> OpenError {
        let what = format!("directory '{}'", name.to_string_lossy());
        if e.raw_os_error() == Some(libc::ENOTDIR) {
            // O_DIRECTORY | O_NOFOLLOW on a symbolic link reports ENOTDIR on some systems.
            return OpenError::Refused(format!(
                "{what} is not a directory (or is a symbolic link, which is never followed)"
            ));
        }
        classify(e, &what)
    }

    pub(super) fn open_beneath(dir: &Path, rel: &Path) -> Result<File, OpenError> {
        #[cfg(target_os = "linux")]
        {
            let d = open_dir(dir)?;
            if let Some(r) = openat2_beneath(&d, rel) {
                return r.map_err(|e| classify(e, "the location"));
            }
        }
        open_beneath_walk(dir, rel)
    }

    /// The portable way (and the fallback where openat2 is missing): walk the parents with
    /// `O_NOFOLLOW | O_DIRECTORY`, then open the file with `O_NOFOLLOW`.
    pub(super) fn open_beneath_walk(dir: &Path, rel: &Path) -> Result<File, OpenError> {
        let parent = walk_parents(dir, rel, false)?;
        let name = rel.file_name().unwrap_or_default();
        openat(&parent, name, READ_FLAGS, 0).map_err(|e| classify(e, "the location"))
    }

    /// The path the kernel has for an open descriptor.
    pub(super) fn fd_path(file: &File) -> io::Result<PathBuf> {
        #[cfg(target_os = "linux")]
        {
            std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = file;
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    pub(super) fn remove_beneath(dir: &Path, rel: &Path) {
        let Ok(parent) = walk_parents(dir, rel, false) else {
            return;
        };
        let Some(name) = rel.file_name() else {
            return;
        };
        if let Ok(c) = cstr(name) {
            unlink_regular(&parent, &c);
        }
    }

    pub(super) fn link_over(dir: &Path, from: &Path, to: &Path, sync: bool) -> io::Result<()> {
        let parent = walk_parents(dir, to, false).map_err(|e| match e {
            OpenError::Io(e) => e,
            OpenError::Refused(r) => io::Error::other(r),
        })?;
        let from = cstr(&file_name_of(from)?)?;
        let name = file_name_of(to)?;
        let fd = parent.as_raw_fd();
        let temp = with_free_temp(&name, |temp| {
            let c = cstr(temp)?;
            // SAFETY: live directory descriptor and NUL-terminated names.
            if unsafe { libc::linkat(fd, from.as_ptr(), fd, c.as_ptr(), 0) } == 0 {
                return Ok(Some(()));
            }
            unless_taken(Err(io::Error::last_os_error()))
        })?
        .0;
        rename_or_remove(Temp::new(parent, &temp, &name)?, sync)
    }

    /// `fstatat(parent, name)` without following a final symlink; `None` when it fails.
    fn stat_beneath(parent: &File, name: &CString) -> Option<libc::stat> {
        // SAFETY: `st` is plain data fully written by fstatat on success.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: live directory descriptor, NUL-terminated name, valid `stat` buffer.
        let r = unsafe {
            libc::fstatat(
                parent.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        (r == 0).then_some(st)
    }

    /// `unlinkat(parent, name)` when `name` is a regular file there.
    fn unlink_regular(parent: &File, name: &CString) {
        if stat_beneath(parent, name).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG) {
            // SAFETY: live directory descriptor and NUL-terminated name.
            unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), 0) };
        }
    }

    pub(super) fn remove_stale_temps(dir: &Path, rels: &[PathBuf]) {
        for (rel, temps) in super::temps_of_others(dir, rels) {
            let Ok(parent) = walk_parents(dir, rel, false) else {
                continue;
            };
            for (name, pid) in temps {
                let Ok(pid_t) = libc::pid_t::try_from(pid) else {
                    continue;
                };
                // SAFETY: kill(2) with signal 0 only checks whether the process exists.
                let gone = unsafe { libc::kill(pid_t, 0) } != 0
                    && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
                if gone && let Ok(c) = cstr(&name) {
                    unlink_regular(&parent, &c);
                }
            }
        }
    }

    /// Walks to (creating) the parent directory of a destination and checks it; returns the
    /// directory and the destination's name.
    pub(super) fn prepare_write(
        dir: &Path,
        rel: &Path,
    ) -> Result<(File, std::ffi::OsString), OpenError> {
        let parent = walk_parents(dir, rel, true)?;
        // The parent directory must lie inside `dir` (defence in depth: the walk followed
        // no link).
        if let Ok(actual) = fd_path(&parent) {
            let canon = dir.canonicalize()?;
            if !actual.starts_with(&canon) {
                return Err(OpenError::Refused(format!(
                    "directory {} is outside {}",
                    actual.display(),
                    canon.display()
                )));
            }
        }
        let name_os = file_name_of(rel)?;
        let name = cstr(&name_os)?;
        // The existing destination, if any, must be a plain file with one link.
        if let Some(st) = stat_beneath(&parent, &name) {
            let kind = st.st_mode & libc::S_IFMT;
            if kind == libc::S_IFLNK {
                return Err(OpenError::Refused(
                    "the destination is a symbolic link (never written through)".into(),
                ));
            }
            if kind != libc::S_IFREG {
                return Err(OpenError::Refused(
                    "the destination exists and is not a regular file".into(),
                ));
            }
            if st.st_nlink > 1 {
                return Err(OpenError::Refused(format!(
                    "the destination has {} hard links",
                    st.st_nlink
                )));
            }
        } else {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(OpenError::Io(e));
            }
        }
        Ok((parent, name_os))
    }
}

#[cfg(not(unix))]
mod imp {
    //! Windows (and any other non-Unix system): checks every component with `symlink_metadata`
    //! before opening; symbolic links, junctions and every other reparse point are refused. Not
    //! race-free against a concurrent attacker in the directory for the parents, but the file
    //! itself is opened without following a reparse point (`FILE_FLAG_OPEN_REPARSE_POINT`) and
    //! checked on the handle: not a reparse point, one hard link (two when both are in its own
    //! directory), and the handle's final path (`GetFinalPathNameByHandleW`) inside the model
    //! directory. The destination of a save is replaced with
    //! `MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)`.
    use super::{OpenError, file_name_of};
    use crate::storage::atomic::{Temp, rename_or_remove, unless_taken, with_free_temp};
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};

    /// A symbolic link, or on Windows any reparse point (junction, mount point, ...).
    fn is_link_like(m: &std::fs::Metadata) -> bool {
        #[cfg(windows)]
        {
            use std::os::windows::fs::MetadataExt;
            if is_reparse_point(m.file_attributes()) {
                return true;
            }
        }
        m.file_type().is_symlink()
    }

    /// Whether Windows file attributes mark a reparse point (a symbolic link, a junction, a
    /// mount point, a cloud placeholder...).
    #[cfg(windows)]
    pub(super) fn is_reparse_point(attributes: u32) -> bool {
        use windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_REPARSE_POINT;
        attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
    }

    /// Opens `path` for reading without following a final reparse point (Windows).
    fn open_no_follow(path: &Path) -> io::Result<File> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt;
            options.custom_flags(
                windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT,
            );
        }
        options.open(path)
    }

    /// The rules checked on the opened file `rel` beneath `dir` itself: not a reparse point, and
    /// one hard link, or two both in its own directory (a save moving a weight file to its
    /// final name holds two links for a moment, see [`link_over`]).
    fn check_handle(file: &File, dir: &Path, rel: &Path) -> Result<(), OpenError> {
        if is_link_like(&file.metadata()?) {
            return Err(OpenError::Refused(
                "the location is a symbolic link, junction or other reparse point (never followed)"
                    .into(),
            ));
        }
        #[cfg(windows)]
        {
            let info = handle_info(file).map_err(OpenError::Io)?;
            if info.nNumberOfLinks > 1
                && !(info.nNumberOfLinks == 2 && both_links_beside(dir, rel, &info))
            {
                return Err(OpenError::Refused(format!(
                    "the file has {} hard links (a hard link can point outside the model \
                     directory)",
                    info.nNumberOfLinks
                )));
            }
        }
        #[cfg(not(windows))]
        let _ = (dir, rel);
        Ok(())
    }

    /// The volume, file index, size and link count of an open file.
    #[cfg(windows)]
    fn handle_info(
        file: &File,
    ) -> io::Result<windows_sys::Win32::Storage::FileSystem::BY_HANDLE_FILE_INFORMATION> {
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Storage::FileSystem::{
            BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
        };
        // SAFETY: plain integers; all-zero is a valid value, overwritten on success.
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: a live file handle and a properly sized output structure.
        if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }

    /// Whether the two links of the file `rel` beneath `dir` (`info`: its handle's information)
    /// are both entries of its own directory: among at most [`super::MAX_LINK_SCAN`] entries,
    /// the regular files of its size are opened (no access asked, any sharing, reparse points
    /// not followed) and compared by volume and file index.
    #[cfg(windows)]
    fn both_links_beside(
        dir: &Path,
        rel: &Path,
        info: &windows_sys::Win32::Storage::FileSystem::BY_HANDLE_FILE_INFORMATION,
    ) -> bool {
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_FLAG_OPEN_REPARSE_POINT, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
        };
        let size = (u64::from(info.nFileSizeHigh) << 32) | u64::from(info.nFileSizeLow);
        let Ok(entries) = std::fs::read_dir(dir.join(rel.parent().unwrap_or(Path::new("")))) else {
            return false;
        };
        let mut found = 0;
        for entry in entries.take(super::MAX_LINK_SCAN).flatten() {
            // The listing's own metadata (no open): only regular files of the same size.
            match entry.metadata() {
                Ok(m) if m.is_file() && !is_link_like(&m) && m.len() == size => {}
                _ => continue,
            }
            let opened = std::fs::OpenOptions::new()
                .access_mode(0)
                .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
                .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
                .open(entry.path());
            if let Ok(other) = opened.and_then(|f| handle_info(&f))
                && other.dwVolumeSerialNumber == info.dwVolumeSerialNumber
                && other.nFileIndexHigh == info.nFileIndexHigh
                && other.nFileIndexLow == info.nFileIndexLow
            {
                found += 1;
            }
        }
        found == 2
    }

    fn check_components(dir: &Path, rel: &Path, create: bool) -> Result<PathBuf, OpenError> {
        let mut cur = dir.to_path_buf();
        let comps: Vec<_> = rel.components().collect();
        for (i, c) in comps.iter().enumerate() {
            cur.push(c.as_os_str());
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if is_link_like(&m) => {
                    return Err(OpenError::Refused(format!(
                        "'{}' is a symbolic link, junction or other reparse point (never followed)",
                        cur.display()
                    )));
                }
                Ok(m) if i + 1 < comps.len() && !m.is_dir() => {
                    return Err(OpenError::Refused(format!(
                        "'{}' is not a directory",
                        cur.display()
                    )));
                }
                Ok(_) => {}
                Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                    if i + 1 < comps.len() {
                        std::fs::create_dir(&cur)?;
                    }
                }
                Err(e) => return Err(OpenError::Io(e)),
            }
        }
        Ok(cur)
    }

    pub(super) fn open_beneath(dir: &Path, rel: &Path) -> Result<File, OpenError> {
        let p = check_components(dir, rel, false)?;
        // Checked before opening: Windows opens a directory only with backup semantics.
        if !std::fs::symlink_metadata(&p)?.is_file() {
            return Err(OpenError::Refused(
                "not a regular file (directory, FIFO, socket or device)".into(),
            ));
        }
        let file = open_no_follow(&p)?;
        check_handle(&file, dir, rel)?;
        Ok(file)
    }

    /// The final path of an open handle (`\\?\C:\...`, the form `canonicalize` returns).
    pub(super) fn fd_path(file: &File) -> io::Result<PathBuf> {
        #[cfg(windows)]
        {
            use std::os::windows::ffi::OsStringExt;
            use std::os::windows::io::AsRawHandle;
            use windows_sys::Win32::Storage::FileSystem::{
                FILE_NAME_NORMALIZED, GetFinalPathNameByHandleW, VOLUME_NAME_DOS,
            };
            let mut buf = vec![0u16; 512];
            loop {
                let capacity = u32::try_from(buf.len()).unwrap_or(u32::MAX);
                // SAFETY: a live file handle and a writable buffer of `capacity` UTF-16 units.
                let n = unsafe {
                    GetFinalPathNameByHandleW(
                        file.as_raw_handle(),
                        buf.as_mut_ptr(),
                        capacity,
                        FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
                    )
                } as usize;
                if n == 0 {
                    return Err(io::Error::last_os_error());
                }
                if n < buf.len() {
                    return Ok(PathBuf::from(std::ffi::OsString::from_wide(&buf[..n])));
                }
                // Too small: `n` is the size needed, terminating NUL included.
                buf.resize(n, 0);
            }
        }
        #[cfg(not(windows))]
        {
            let _ = file;
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    pub(super) fn remove_beneath(dir: &Path, rel: &Path) {
        if let Ok(p) = check_components(dir, rel, false)
            && std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file())
        {
            let _ = std::fs::remove_file(p);
        }
    }

    pub(super) fn link_over(dir: &Path, from: &Path, to: &Path, sync: bool) -> io::Result<()> {
        let map = |e: OpenError| match e {
            OpenError::Io(e) => e,
            OpenError::Refused(r) => io::Error::other(r),
        };
        let from = check_components(dir, from, false).map_err(map)?;
        let to = check_components(dir, to, false).map_err(map)?;
        let name = to.file_name().unwrap_or_default().to_os_string();
        let parent = to.parent().unwrap_or(dir).to_path_buf();
        let temp = with_free_temp(&name, |temp| {
            unless_taken(std::fs::hard_link(&from, parent.join(temp)))
        })?
        .0;
        rename_or_remove(Temp::new(parent, &temp, &name)?, sync)
    }

    /// Windows: the temporary files whose process has ended (`OpenProcess` finds no such
    /// process, or its exit code is set) are removed. Elsewhere process liveness is not checked,
    /// so nothing is removed (stale temporary files are hidden names that no model references).
    pub(super) fn remove_stale_temps(dir: &Path, rels: &[PathBuf]) {
        #[cfg(windows)]
        for (rel, temps) in super::temps_of_others(dir, rels) {
            let sub = rel.parent().unwrap_or(Path::new(""));
            for (name, pid) in temps {
                if process_ended(pid) {
                    remove_beneath(dir, &sub.join(name));
                }
            }
        }
        #[cfg(not(windows))]
        let _ = (dir, rels);
    }

    /// Whether process `pid` has ended: no such process, or one whose exit code is set (a
    /// process whose state cannot be read, such as another user's, counts as running).
    #[cfg(windows)]
    fn process_ended(pid: u32) -> bool {
        use windows_sys::Win32::Foundation::{
            CloseHandle, ERROR_INVALID_PARAMETER, GetLastError, STILL_ACTIVE,
        };
        use windows_sys::Win32::System::Threading::{
            GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
        };
        // SAFETY: OpenProcess takes plain values; a non-null handle is closed below, once.
        let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if handle.is_null() {
            // SAFETY: reads this thread's last error, set by the failed call just above.
            return unsafe { GetLastError() } == ERROR_INVALID_PARAMETER;
        }
        let mut code = 0u32;
        // SAFETY: `handle` is a live process handle with query rights; `code` is writable.
        let read = unsafe { GetExitCodeProcess(handle, &mut code) } != 0;
        // SAFETY: `handle` came from OpenProcess above and is not used after this.
        unsafe { CloseHandle(handle) };
        read && code != STILL_ACTIVE as u32
    }

    /// Checks the components of a destination (creating the missing directories) and the
    /// destination itself; returns its directory and name.
    pub(super) fn prepare_write(
        dir: &Path,
        rel: &Path,
    ) -> Result<(PathBuf, std::ffi::OsString), OpenError> {
        let dest = check_components(dir, rel, true)?;
        let name = file_name_of(rel)?;
        if let Ok(m) = std::fs::symlink_metadata(&dest)
            && (!m.is_file() || is_link_like(&m))
        {
            return Err(OpenError::Refused(
                "the destination exists and is not a regular file (or is a reparse point)".into(),
            ));
        }
        let parent = dest.parent().unwrap_or(dir).to_path_buf();
        if !parent.canonicalize()?.starts_with(dir.canonicalize()?) {
            return Err(OpenError::Refused("outside the model directory".into()));
        }
        Ok((parent, name))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Both ways of opening (openat2 and the O_NOFOLLOW walk) refuse the same attacks.
    #[test]
    fn openat2_and_walk_refuse_the_same_paths() {
        let root = std::env::temp_dir().join(format!("onnxl-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (dir, out) = (root.join("d"), root.join("out"));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("s.bin"), b"secret").unwrap();
        std::fs::write(dir.join("ok.bin"), b"fine").unwrap();
        std::fs::write(dir.join("real/in.bin"), b"inner").unwrap();
        symlink(out.join("s.bin"), dir.join("link.bin")).unwrap();
        symlink(&out, dir.join("outdir")).unwrap();
        symlink(dir.join("real"), dir.join("alias")).unwrap();
        std::fs::hard_link(out.join("s.bin"), dir.join("hard.bin")).unwrap();
        // Two links, both in the model's directory (a save between its two commits).
        std::fs::write(dir.join("twin.bin"), b"tw").unwrap();
        std::fs::hard_link(dir.join("twin.bin"), dir.join("twin_1.bin")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
        type Open = fn(&Path, &Path) -> Result<File, OpenError>;
        let ways: [(&str, Open); 2] = [
            ("default", imp::open_beneath),
            ("walk", imp::open_beneath_walk),
        ];
        for (way, open) in ways {
            let full = |rel: &str| -> Result<SafeFile, OpenError> {
                let rel = normalize_location(rel).map_err(OpenError::Refused)?;
                let file = open(&dir, &rel)?;
                let meta = file.metadata()?;
                check_opened(&meta, || links_all_beside(&dir, &rel, &meta))?;
                check_containment(&dir, &file, &rel)?;
                Ok(SafeFile {
                    len: meta.len(),
                    file,
                })
            };
            assert_eq!(full("ok.bin").map(|f| f.len).ok(), Some(4), "{way}");
            assert_eq!(full("twin.bin").map(|f| f.len).ok(), Some(2), "{way}");
            assert_eq!(full("twin_1.bin").map(|f| f.len).ok(), Some(2), "{way}");
            assert_eq!(full("real/in.bin").map(|f| f.len).ok(), Some(5), "{way}");
            for bad in [
                "link.bin",
                "outdir/s.bin",
                "alias/in.bin",
                "hard.bin",
                "fifo",
                "real",
            ] {
                match full(bad) {
                    Err(OpenError::Refused(_)) => {}
                    Err(OpenError::Io(e)) => panic!("{way} {bad}: I/O error {e}, not a refusal"),
                    Ok(_) => panic!("{way} {bad}: opened"),
                }
            }
            assert!(matches!(full("nope.bin"), Err(OpenError::Io(_))), "{way}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn lexical_rules() {
        for bad in [
            "",
            "/a",
            "\\a",
            "C:\\a",
            "c:a",
            "..",
            "../a",
            "a/../../b",
            "a\\..\\..\\b",
            ".",
            "a/..",
            "x:y",
            "*/_ORT_MEM_ADDR_/*",
            "a\0b",
        ] {
            assert!(normalize_location(bad).is_err(), "{bad:?}");
        }
        assert_eq!(normalize_location("a/./b").unwrap(), Path::new("a/b"));
        assert_eq!(normalize_location("a/../b").unwrap(), Path::new("b"));
        assert_eq!(normalize_location("a\\b").unwrap(), Path::new("a/b"));
        assert_eq!(normalize_location("w.bin").unwrap(), Path::new("w.bin"));
    }
}

/// Rules that hold on every platform, and the Windows name rules (checked everywhere as a
/// function, enforced by `normalize_location` on Windows only).
#[cfg(test)]
mod portable_tests {
    use super::*;

    #[test]
    fn unc_verbatim_and_stream_locations_are_refused_everywhere() {
        for bad in [
            "\\\\server\\share\\w.bin",
            "//server/share/w.bin",
            "\\\\?\\C:\\w.bin",
            "\\\\.\\PhysicalDrive0",
            "w.bin:secret",
            "a/w.bin::$DATA",
            "C:w.bin",
        ] {
            assert!(normalize_location(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn windows_name_rules() {
        for bad in [
            "CON",
            "con.bin",
            "Nul.tar.gz",
            "NUL ",
            "aux .bin",
            "COM1",
            "com9.bin",
            "LPT0.x",
            "COM¹",
            "lpt³.bin",
            "CONIN$",
            "conout$.txt",
            "w.bin.",
            "w.bin ",
            "...",
            "a<b",
            "a>b",
            "a\"b",
            "a|b",
            "a?b",
            "a*b",
            "a\u{1}b",
        ] {
            assert!(windows_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in [
            "w.bin",
            "CONSOLE.bin",
            "COM10",
            "LPT",
            "nul_1.bin",
            "con_x",
            ".hidden",
            "a b.bin",
            "COMx.bin",
        ] {
            assert_eq!(windows_name_problem(good), None, "{good:?}");
        }
        let refused = normalize_location("d/CON.bin").is_err();
        assert_eq!(
            refused,
            cfg!(windows),
            "reserved names are a Windows-only rule"
        );
        assert_eq!(normalize_location("d/w.bin.").is_err(), cfg!(windows));
    }
}

/// The Windows side of opening and replacing (symbolic links, hard links, final handle path,
/// atomic replace); run under Wine by scripts/test.d/70-cross.sh.
#[cfg(all(test, windows))]
mod windows_tests {
    use super::*;

    fn fresh_dir(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("onnxl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("d/sub")).unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        root
    }

    fn refused(r: Result<SafeFile, OpenError>) -> String {
        match r {
            Err(OpenError::Refused(why)) => why,
            Err(OpenError::Io(e)) => panic!("an I/O error, not a refusal: {e}"),
            Ok(_) => panic!("opened"),
        }
    }

    #[test]
    fn opens_inside_and_refuses_links() {
        let root = fresh_dir("win-open");
        let dir = root.join("d");
        std::fs::write(dir.join("sub/w.bin"), b"weights").unwrap();
        std::fs::write(root.join("out/s.bin"), b"secret").unwrap();
        let open = |rel: &str| open_beneath(&dir, &normalize_location(rel).unwrap());
        let ok = open("sub\\w.bin").unwrap();
        assert_eq!(ok.len, 7);
        let final_path = imp::fd_path(&ok.file).unwrap();
        assert!(
            final_path.starts_with(dir.canonicalize().unwrap()),
            "{}",
            final_path.display()
        );
        assert!(refused(open("sub")).contains("not a regular file"));
        std::fs::hard_link(root.join("out/s.bin"), dir.join("hard.bin")).unwrap();
        assert!(refused(open("hard.bin")).contains("hard links"));
        // Two links, both in the file's own directory (a save between its two commits): both
        // names open. A third link, or a second one in another directory, is refused.
        std::fs::write(dir.join("sub/twin.bin"), b"tw").unwrap();
        std::fs::hard_link(dir.join("sub/twin.bin"), dir.join("sub/twin_1.bin")).unwrap();
        // Another file of the same size in the directory (opened and compared, not counted).
        std::fs::write(dir.join("sub/same.bin"), b"xy").unwrap();
        assert_eq!(open("sub/twin.bin").unwrap().len, 2);
        assert_eq!(open("sub/twin_1.bin").unwrap().len, 2);
        std::fs::hard_link(dir.join("sub/twin.bin"), dir.join("sub/twin_2.bin")).unwrap();
        assert!(refused(open("sub/twin.bin")).contains("3 hard links"));
        std::fs::write(dir.join("sub/pair.bin"), b"pp").unwrap();
        std::fs::hard_link(dir.join("sub/pair.bin"), dir.join("pair.bin")).unwrap();
        assert!(refused(open("sub/pair.bin")).contains("2 hard links"));
        assert!(refused(open("pair.bin")).contains("2 hard links"));
        // Symbolic links and junctions are not created here: Wine has no real reparse points.
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Wine 8 cannot make a reparse point: `CreateSymbolicLinkW` reports success and creates
    /// nothing, `mklink /J` fails, and a Unix symbolic link shows as the file it points to. So
    /// the check is tested on the attributes a junction and a symbolic link carry on Windows.
    #[test]
    fn reparse_points_are_refused_by_their_attribute() {
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_ATTRIBUTE_ARCHIVE, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL,
            FILE_ATTRIBUTE_REPARSE_POINT,
        };
        let junction = FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT;
        let file_link = FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_REPARSE_POINT;
        assert!(imp::is_reparse_point(junction));
        assert!(imp::is_reparse_point(file_link));
        assert!(!imp::is_reparse_point(FILE_ATTRIBUTE_DIRECTORY));
        assert!(!imp::is_reparse_point(FILE_ATTRIBUTE_ARCHIVE));
        assert!(!imp::is_reparse_point(FILE_ATTRIBUTE_NORMAL));
        // The attributes of real files, read through the same call the check uses.
        let root = fresh_dir("win-reparse");
        std::fs::write(root.join("d/w.bin"), b"w").unwrap();
        for p in [root.join("d"), root.join("d/w.bin")] {
            use std::os::windows::fs::MetadataExt;
            let attributes = std::fs::symlink_metadata(&p).unwrap().file_attributes();
            assert!(!imp::is_reparse_point(attributes), "{}", p.display());
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn atomic_writes_replace_or_leave_the_destination() {
        let root = fresh_dir("win-replace");
        let dir = root.join("d");
        let rel = normalize_location("sub/w.bin").unwrap();
        std::fs::write(dir.join(&rel), b"old").unwrap();
        {
            let mut out = create_beneath(&dir, &rel, true).unwrap();
            std::io::Write::write_all(out.file(), b"abandoned").unwrap();
        }
        assert_eq!(std::fs::read(dir.join(&rel)).unwrap(), b"old");
        for sync in [false, true] {
            let mut out = create_beneath(&dir, &rel, sync).unwrap();
            std::io::Write::write_all(out.file(), b"new").unwrap();
            out.commit().unwrap();
            assert_eq!(std::fs::read(dir.join(&rel)).unwrap(), b"new");
        }
        let names: Vec<_> = std::fs::read_dir(dir.join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["w.bin"], "no temporary file left behind");
        std::fs::write(dir.join("sub/a.bin"), b"aa").unwrap();
        link_over(&dir, Path::new("sub/a.bin"), &rel, true).unwrap();
        assert_eq!(std::fs::read(dir.join(&rel)).unwrap(), b"aa");
        std::fs::create_dir(dir.join("sub/x.bin")).unwrap();
        assert!(matches!(
            create_beneath(&dir, Path::new("sub/x.bin"), true),
            Err(OpenError::Refused(_))
        ));
        let _ = std::fs::remove_dir_all(&root);
    }
}
