//! The one atomic writer: every file a save writes (the `.onnx`, its weight files, encrypted
//! outputs, parameter files) is written under a temporary name in its destination's directory,
//! synced when asked, and renamed over the destination by [`AtomicFile::commit`]. Dropped
//! without a commit, the temporary file is removed and the destination is untouched.
//!
//! On Unix the file is created and renamed relative to an open descriptor of the directory
//! (`openat`, `renameat`): a directory renamed or replaced by a link during the save cannot
//! redirect it. The weight files of a save come through `external::paths`, which walks to
//! their directory without following links and hands the descriptor over
//! ([`AtomicFile::create_in`]). On Windows the rename is `MoveFileExW` with
//! `MOVEFILE_REPLACE_EXISTING` (and `MOVEFILE_WRITE_THROUGH` when syncing).
//!
//! Temporary names are `.NAME.tmp-PID-N` ([`temp_name`]); [`temp_owner`] reads the process id
//! back, so that the temporary files of killed saves can be found and removed.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub(crate) use sys::{Dir, Temp};
#[cfg(unix)]
pub(crate) use sys::{cstr, open_dir, openat};

/// How many temporary names a writer tries before it gives up (names taken by other writers).
const TEMP_ATTEMPTS: u32 = 1000;

/// The temporary name of attempt `attempt` at writing `name` in this process:
/// `.NAME.tmp-PID-N`.
pub(crate) fn temp_name(name: &OsStr, attempt: u32) -> OsString {
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!(".tmp-{}-{attempt}", std::process::id()));
    t
}

/// The process id in a temporary file name made by [`temp_name`], if it is one.
#[cfg(any(unix, windows))]
pub(crate) fn temp_owner(entry: &OsStr) -> Option<u32> {
    let entry = entry.to_str()?;
    let (name, rest) = entry.strip_prefix('.')?.rsplit_once(".tmp-")?;
    let (pid, attempt) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (!name.is_empty() && digits(pid) && digits(attempt)).then(|| pid.parse().ok())?
}

/// Makes a temporary file for `name` with `create(temp_name)`, which gives `None` when the name
/// is taken: the first free [`temp_name`] (of [`TEMP_ATTEMPTS`]) and what `create` gave.
pub(crate) fn with_free_temp<T>(
    name: &OsStr,
    mut create: impl FnMut(&OsStr) -> io::Result<Option<T>>,
) -> io::Result<(OsString, T)> {
    for attempt in 0..TEMP_ATTEMPTS {
        let temp = temp_name(name, attempt);
        if let Some(made) = create(&temp)? {
            return Ok((temp, made));
        }
    }
    Err(io::ErrorKind::AlreadyExists.into())
}

/// `r` as "made" (`Some`), "the name is taken" (`None`) or an error: the result a
/// [`with_free_temp`] attempt gives.
pub(crate) fn unless_taken<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(made) => Ok(Some(made)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// Renames `temp` over its destination, or removes it when that fails.
pub(crate) fn rename_or_remove(temp: Temp, sync: bool) -> io::Result<()> {
    temp.rename_over(sync).map_err(|(e, temp)| {
        temp.remove();
        e
    })
}

/// How many files the atomic writer synced before their rename (a test hook: tests check that
/// `sync` false syncs nothing).
#[cfg(feature = "test-hooks")]
pub(crate) static FILE_SYNCS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// A file being written under a temporary name beside its destination; [`AtomicFile::commit`]
/// syncs it (unless created with `sync` false) and renames it over the destination. Dropped
/// without commit, it is removed, and the destination is untouched.
pub struct AtomicFile {
    file: Option<File>,
    /// The temporary file's place; `None` once renamed.
    temp: Option<Temp>,
    dest: PathBuf,
    sync: bool,
}

impl AtomicFile {
    /// Creates the temporary file for `dest`; its commit syncs it.
    pub fn create(dest: &Path) -> Result<Self> {
        Self::create_with(dest, true)
    }

    /// Creates the temporary file for `dest`; with `sync` false its commit renames it without
    /// syncing it first (`SaveExternalOptions::sync`).
    pub fn create_with(dest: &Path, sync: bool) -> Result<Self> {
        let name = dest.file_name().ok_or_else(|| {
            Error::InvalidArgument(format!("{} is not a file path", dest.display()))
        })?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir_handle = sys::dir_of(dir).map_err(|e| Error::io(dir, e))?;
        Self::create_in(dir_handle, name, dest.to_path_buf(), sync)
            .map_err(|e| Error::io(dir.join(temp_name(name, 0)), e))
    }

    /// Creates the temporary file for `name` in the directory `dir` (a descriptor on Unix, a
    /// path elsewhere), checked by the caller; `dest` (the destination's full path) is for
    /// messages.
    pub(crate) fn create_in(dir: Dir, name: &OsStr, dest: PathBuf, sync: bool) -> io::Result<Self> {
        let (temp, file) = with_free_temp(name, |temp| sys::create_new(&dir, temp))?;
        Ok(Self {
            file: Some(file),
            temp: Some(Temp::new(dir, &temp, name)?),
            dest,
            sync,
        })
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("file is open until commit")
    }

    /// The open temporary file, for positional writes from several threads.
    pub(crate) fn shared(&self) -> &File {
        self.file.as_ref().expect("file is open until commit")
    }

    /// The destination path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Syncs the data (when asked) and renames the temporary file over the destination; with
    /// `sync`, the directory too (so that the rename is durable).
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("file is open until commit");
        if self.sync {
            // On failure `Drop` removes the temporary file.
            file.sync_all().map_err(|e| Error::io(&self.dest, e))?;
            #[cfg(feature = "test-hooks")]
            FILE_SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        drop(file);
        let temp = self.temp.take().expect("renamed once");
        rename_or_remove(temp, self.sync).map_err(|e| Error::io(&self.dest, e))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            self.file.take();
            temp.remove();
        }
    }
}

#[cfg(unix)]
mod sys {
    use std::ffi::{CString, OsStr};
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    /// A directory the writer creates and renames in: an open descriptor.
    pub(crate) type Dir = File;

    /// `s` as a C string (refused with a NUL byte).
    pub(crate) fn cstr(s: &OsStr) -> io::Result<CString> {
        CString::new(s.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
    }

    /// `dir`, opened as a directory.
    pub(crate) fn open_dir(dir: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)
    }

    /// The directory of a destination the caller named: opened for reading, or on Linux,
    /// where it cannot be read (write and search permission only), as a path descriptor
    /// (`O_PATH`: enough to create and rename in; its sync is skipped).
    pub(super) fn dir_of(dir: &Path) -> io::Result<File> {
        match open_dir(dir) {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
                .open(dir),
            r => r,
        }
    }

    /// `openat(dirfd, name, flags)` into an owned descriptor.
    pub(crate) fn openat(
        dirfd: &impl AsRawFd,
        name: &OsStr,
        flags: i32,
        mode: u32,
    ) -> io::Result<File> {
        let c = cstr(name)?;
        // SAFETY: `c` is a NUL-terminated string alive for the call; `dirfd` is an open
        // descriptor; the result is checked before it is wrapped.
        let fd = unsafe { libc::openat(dirfd.as_raw_fd(), c.as_ptr(), flags, mode) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// A temporary file in its directory, with the destination's name there (made by the
    /// writer, or by `external::paths` as a hard link of a file already there).
    pub(crate) struct Temp {
        dir: File,
        temp: CString,
        name: CString,
    }

    /// Creates the file `temp` in `dir` (never through a link); `None` when the name is taken.
    pub(super) fn create_new(dir: &File, temp: &OsStr) -> io::Result<Option<File>> {
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        super::unless_taken(openat(dir, temp, flags, 0o666))
    }

    impl Temp {
        /// The file `temp` in `dir`, for the destination `name` there.
        pub(crate) fn new(dir: File, temp: &OsStr, name: &OsStr) -> io::Result<Self> {
            Ok(Self {
                dir,
                temp: cstr(temp)?,
                name: cstr(name)?,
            })
        }

        /// Renames the file over the destination; with `sync`, syncs the directory after.
        /// On failure the file is still there, given back for removal.
        pub(crate) fn rename_over(self, sync: bool) -> Result<(), (io::Error, Self)> {
            let fd = self.dir.as_raw_fd();
            // SAFETY: live directory descriptor and NUL-terminated names.
            if unsafe { libc::renameat(fd, self.temp.as_ptr(), fd, self.name.as_ptr()) } != 0 {
                return Err((io::Error::last_os_error(), self));
            }
            if sync {
                // Best effort (a path descriptor cannot be synced).
                let _ = self.dir.sync_all();
            }
            Ok(())
        }

        /// Removes the file (best effort).
        pub(crate) fn remove(self) {
            // SAFETY: live directory descriptor and NUL-terminated name.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.temp.as_ptr(), 0) };
        }
    }
}

#[cfg(not(unix))]
mod sys {
    use std::ffi::OsStr;
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};

    /// A directory the writer creates and renames in: its path.
    pub(crate) type Dir = PathBuf;

    pub(super) fn dir_of(dir: &Path) -> io::Result<PathBuf> {
        Ok(dir.to_path_buf())
    }

    /// Renames `from` over `to`, replacing it atomically (Windows: `MoveFileExW` with
    /// `MOVEFILE_REPLACE_EXISTING`, and `MOVEFILE_WRITE_THROUGH` when `sync`).
    fn replace(from: &Path, to: &Path, sync: bool) -> io::Result<()> {
        #[cfg(windows)]
        {
            use std::os::windows::ffi::OsStrExt;
            use windows_sys::Win32::Storage::FileSystem::{
                MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, MoveFileExW,
            };
            let wide = |p: &Path| -> Vec<u16> {
                p.as_os_str()
                    .encode_wide()
                    .chain(std::iter::once(0))
                    .collect()
            };
            let (from, to) = (wide(from), wide(to));
            let flags = MOVEFILE_REPLACE_EXISTING | if sync { MOVEFILE_WRITE_THROUGH } else { 0 };
            // SAFETY: two NUL-terminated UTF-16 strings alive for the call.
            if unsafe { MoveFileExW(from.as_ptr(), to.as_ptr(), flags) } == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(windows))]
        {
            let _ = sync;
            std::fs::rename(from, to)
        }
    }

    /// A temporary file and its destination (made by the writer, or by `external::paths` as
    /// a hard link of a file already there).
    pub(crate) struct Temp {
        temp: PathBuf,
        dest: PathBuf,
    }

    /// Creates the file `temp` in `dir`; `None` when the name is taken.
    pub(super) fn create_new(dir: &Path, temp: &OsStr) -> io::Result<Option<File>> {
        super::unless_taken(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(temp)),
        )
    }

    impl Temp {
        /// The file `temp` in `dir`, for the destination `name` there.
        pub(crate) fn new(dir: PathBuf, temp: &OsStr, name: &OsStr) -> io::Result<Self> {
            Ok(Self {
                temp: dir.join(temp),
                dest: dir.join(name),
            })
        }

        /// Renames the file over the destination. On failure the file is still there,
        /// given back for removal.
        pub(crate) fn rename_over(self, sync: bool) -> Result<(), (io::Error, Self)> {
            replace(&self.temp, &self.dest, sync).map_err(|e| (e, self))
        }

        /// Removes the file (best effort).
        pub(crate) fn remove(self) {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
