//! Saves to one destination, one at a time across processes: an advisory lock (`flock`) on a
//! lock file beside the model, `.NAME.lock`, held from planning to the last commit and released
//! on every exit path (drop, panic, process death). Without it two concurrent saves could
//! commit one's `.onnx` over the other's weight files. The lock file is removed by the holder
//! before it unlocks; a waiter that then gets the lock on the removed file notices (the name no
//! longer leads to the file it holds) and takes the lock again on the current file. Advisory:
//! only saves of this library take it. Elsewhere than on Unix it does nothing.

use std::path::{Path, PathBuf};

#[cfg(unix)]
use crate::error::Error;
use crate::error::Result;

/// The lock of one destination, held while this value lives.
pub(crate) struct SaveLock {
    #[cfg(unix)]
    file: std::fs::File,
    path: PathBuf,
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

#[cfg(not(unix))]
impl SaveLock {
    /// No lock: advisory file locks are only used on Unix.
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
        #[cfg(unix)]
        {
            let _ = std::fs::remove_file(&self.path);
            let _ = &self.file;
        }
        #[cfg(not(unix))]
        let _ = &self.path;
    }
}

#[cfg(all(test, unix))]
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
