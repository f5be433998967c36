//! Saves to one destination, one at a time across processes: an advisory lock (`flock`) on a
//! lock file beside the model, `.NAME.lock`, held from planning to the last commit and released
//! on every exit path (drop, panic, process death). Without it two concurrent saves could
//! commit one's `.onnx` over the other's weight files. The lock file is removed by the holder
//! before it unlocks; a waiter that then gets the lock on the removed file notices (the name no
//! longer leads to the file it holds) and takes the lock again on the current file. Advisory:
//! only saves of this library take it. On Windows the same protocol runs with `LockFileEx` (an
//! exclusive byte-range lock on the lock file, opened with every share mode so that the holder
//! can delete it); a lock file removed while others still hold handles stays "delete pending"
//! (opening it is refused) until they close them: the opener waits and retries. Elsewhere it
//! does nothing.

use std::path::{Path, PathBuf};

#[cfg(any(unix, windows))]
use crate::error::Error;
use crate::error::Result;

/// The lock of one destination, held while this value lives.
pub(crate) struct SaveLock {
    #[cfg(any(unix, windows))]
    file: std::fs::File,
    path: PathBuf,
}

impl SaveLock {
    /// Waits for and takes the lock of the file at `path` (`None` for a path without a file
    /// name, which no save can write).
    pub(crate) fn for_file(path: &Path) -> Result<Option<Self>> {
        let Some(name) = path.file_name() else {
            return Ok(None);
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Self::acquire(dir, &name.to_string_lossy()).map(Some)
    }
}

/// The lock file of the model `model_name` in `dir`.
fn lock_path(dir: &Path, model_name: &str) -> PathBuf {
    dir.join(format!(".{model_name}.lock"))
}

#[cfg(unix)]
impl SaveLock {
    /// Waits for and takes the lock of the model `model_name` in `dir`.
    pub(crate) fn acquire(dir: &Path, model_name: &str) -> Result<Self> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let path = lock_path(dir, model_name);
        loop {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            loop {
                // SAFETY: flock(2) on a descriptor this function owns.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::io(&path, e));
                }
            }
            let held = file.metadata().map_err(|e| Error::io(&path, e))?;
            if !held.file_type().is_file() {
                return Err(Error::PathRefused {
                    path: path.clone(),
                    reason: "the save lock file is not a regular file".into(),
                });
            }
            // The previous holder may have removed the file after this one opened it.
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(Self { file, path });
                }
                _ => continue,
            }
        }
    }
}

#[cfg(windows)]
impl SaveLock {
    /// Waits for and takes the lock of the model `model_name` in `dir`.
    pub(crate) fn acquire(dir: &Path, model_name: &str) -> Result<Self> {
        use std::os::windows::fs::OpenOptionsExt;
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED;
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_FLAG_OPEN_REPARSE_POINT, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
            LOCKFILE_EXCLUSIVE_LOCK, LockFileEx,
        };
        use windows_sys::Win32::System::IO::OVERLAPPED;
        let path = lock_path(dir, model_name);
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
                .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
                .open(&path)
        };
        // How long a lock file may refuse opening ("delete pending": removed by its last holder
        // while waiters still have it open) before the refusal counts as a real one.
        const PENDING_DELETE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);
        let mut refused_since: Option<std::time::Instant> = None;
        loop {
            let file = match open() {
                Ok(file) => file,
                Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
                    let since = *refused_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() > PENDING_DELETE_PATIENCE {
                        return Err(Error::io(&path, e));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                Err(e) => return Err(Error::io(&path, e)),
            };
            // SAFETY: an all-zero OVERLAPPED (offset 0, no event) is valid for a synchronous
            // handle.
            let mut overlapped: OVERLAPPED = unsafe { std::mem::zeroed() };
            // SAFETY: a live handle this function owns; without LOCKFILE_FAIL_IMMEDIATELY the
            // call waits for the lock of the first byte.
            let locked = unsafe {
                LockFileEx(
                    file.as_raw_handle(),
                    LOCKFILE_EXCLUSIVE_LOCK,
                    0,
                    1,
                    0,
                    &mut overlapped,
                )
            };
            if locked == 0 {
                return Err(Error::io(&path, std::io::Error::last_os_error()));
            }
            let held = file_id(&file).map_err(|e| Error::io(&path, e))?;
            if held.0 & FILE_ATTRIBUTE_NOT_REGULAR != 0 {
                return Err(Error::PathRefused {
                    path: path.clone(),
                    reason: "the save lock file is not a regular file".into(),
                });
            }
            // The previous holder may have removed the file after this one opened it: the name
            // then leads to no file or a newer one (or opening is refused while it is pending
            // deletion).
            match open().and_then(|now| file_id(&now)) {
                Ok(now) if now.1 == held.1 => return Ok(Self { file, path }),
                _ => continue,
            }
        }
    }
}

/// Attributes that a plain lock file does not have: directory, reparse point, device.
#[cfg(windows)]
const FILE_ATTRIBUTE_NOT_REGULAR: u32 =
    windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_DIRECTORY
        | windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_REPARSE_POINT
        | windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_DEVICE;

/// The attributes of an open file and its identity (volume serial number, file index).
#[cfg(windows)]
fn file_id(file: &std::fs::File) -> std::io::Result<(u32, (u32, u64))> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
    };
    // SAFETY: plain integers; all-zero is a valid value, overwritten on success.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a live file handle and a properly sized output structure.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((info.dwFileAttributes, (info.dwVolumeSerialNumber, index)))
}

#[cfg(not(any(unix, windows)))]
impl SaveLock {
    /// No lock: advisory file locks are only used on Unix and Windows.
    pub(crate) fn acquire(dir: &Path, model_name: &str) -> Result<Self> {
        Ok(Self {
            path: lock_path(dir, model_name),
        })
    }
}

impl Drop for SaveLock {
    fn drop(&mut self) {
        // Removed while still locked, so no other save ever holds a lock on a file that a
        // newer lock file has replaced; closing the descriptor then unlocks.
        #[cfg(any(unix, windows))]
        {
            let _ = std::fs::remove_file(&self.path);
            let _ = &self.file;
        }
        #[cfg(not(any(unix, windows)))]
        let _ = &self.path;
    }
}

#[cfg(all(test, any(unix, windows)))]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_no_file_left() {
        let dir = std::env::temp_dir().join(format!("onnxl-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (dir, inside) = (dir.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _lock = SaveLock::acquire(&dir, "m.onnx").unwrap();
                        let n = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(n, 0, "two holders at once");
                        std::thread::yield_now();
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(!lock_path(&dir, "m.onnx").exists(), "the lock file stayed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
