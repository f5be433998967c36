//! Where bytes come from and go to: memory-mapped and buffered files, `Write` sinks, and atomic
//! file replacement (temporary file in the same directory, then rename).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::wire::Sink;

/// Files at least this large are memory-mapped in `FileLoadMode::Auto`.
pub const AUTO_MMAP_MIN_BYTES: u64 = 64 * 1024;

/// A read-only memory map of a whole file; used as an owner token for borrowed tensor bytes.
pub struct MappedFile {
    map: Option<Mmap>,
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl MappedFile {
    /// Maps `path` read-only (an empty file maps to an empty slice).
    pub fn open(path: &Path) -> Result<Arc<Self>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Ok(Arc::new(Self { map: None }));
        }
        // SAFETY: the map is read-only and private to this process; the library never writes
        // files it has mapped (saves go to a temporary file that is renamed over the old one).
        // Another process truncating the file while it is mapped is outside this contract and is
        // documented (SIGBUS), as for every mmap-based loader.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Ok(Arc::new(Self { map: Some(map) }))
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.as_ref()
    }
}

/// Reads a whole file into memory.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| Error::io(path, e))
}

/// A [`Sink`] over any `Write`, keeping the first error and counting bytes.
pub struct WriteSink<W: Write> {
    inner: W,
    written: u64,
    error: Option<io::Error>,
}

impl<W: Write> WriteSink<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, written: 0, error: None }
    }

    /// Bytes accepted so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes and returns the writer, or the first error.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Sink for WriteSink<W> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.error.is_none() {
            match self.inner.write_all(bytes) {
                Ok(()) => self.written += bytes.len() as u64,
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// A file being written under a temporary name beside its destination; [`AtomicFile::commit`]
/// syncs it and renames it over the destination. Dropped without commit, it is removed, and the
/// destination is untouched.
pub struct AtomicFile {
    file: Option<File>,
    temp: PathBuf,
    dest: PathBuf,
}

impl AtomicFile {
    /// Creates the temporary file for `dest`.
    pub fn create(dest: &Path) -> Result<Self> {
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| Error::InvalidArgument(format!("{} is not a file path", dest.display())))?;
        let mut attempt = 0u32;
        loop {
            let temp = dir.join(format!(
                ".{}.tmp-{}-{attempt}",
                name.to_string_lossy(),
                std::process::id()
            ));
            match fs::OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => return Ok(Self { file: Some(file), temp, dest: dest.to_path_buf() }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
                Err(e) => return Err(Error::io(&temp, e)),
            }
        }
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("file is open until commit")
    }

    /// The destination path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Syncs the data and renames the temporary file over the destination.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("file is open until commit");
        file.sync_all().map_err(|e| Error::io(&self.temp, e))?;
        drop(file);
        fs::rename(&self.temp, &self.dest).map_err(|e| Error::io(&self.dest, e))?;
        // Make the rename durable.
        if let Some(dir) = self.dest.parent().filter(|p| !p.as_os_str().is_empty())
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        self.temp = PathBuf::new();
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            self.file.take();
            let _ = fs::remove_file(&self.temp);
        }
    }
}
