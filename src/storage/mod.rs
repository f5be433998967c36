//! Where bytes come from and go to: memory-mapped and buffered files, `Write` sinks, atomic
//! file replacement (temporary file in the same directory, then rename), positional reads and
//! writes, and the thread pools of parallel I/O.

pub(crate) mod atomic;
mod direct;
mod lock;
pub(crate) mod par;
mod positional;
mod threads;

pub use atomic::AtomicFile;
#[cfg(feature = "test-hooks")]
pub(crate) use atomic::FILE_SYNCS;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use direct::hooks::{direct_written_bytes, fail_next_direct_writes};
pub(crate) use direct::{DIRECT_MIN_BYTES, Piece, write_pieces};
pub(crate) use lock::SaveLock;
pub(crate) use positional::{presize, read_exact_at};
pub use threads::{MIN_THREAD_CAP, max_threads, release_thread_pools};
pub(crate) use threads::{cores, thread_pool};

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::mem::ReusableMap;
use crate::wire::Sink;

/// Files at least this large are memory-mapped in `FileLoadMode::Auto`.
pub const AUTO_MMAP_MIN_BYTES: u64 = 64 * 1024;

/// A read-only memory map of a whole file; used as an owner token for borrowed tensor bytes.
pub struct MappedFile {
    map: Option<Mmap>,
    /// The file, for positional reads of what the map holds ([`MappedFile::read_at`]).
    file: Option<File>,
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// What a path names when it is not a regular file, in words for error messages (`None` for a
/// regular file).
#[cfg(unix)]
fn non_regular_kind(ft: fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

#[cfg(not(unix))]
fn non_regular_kind(ft: fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else {
        Some("not a file")
    }
}

/// A file of a pseudo file system whose size says nothing about its content (procfs, sysfs).
#[cfg(target_os = "linux")]
fn pseudo_file_system(file: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    // SAFETY: `statfs` is plain data; zeroed is a valid value and `fstatfs` only writes it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open descriptor and a valid out-pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    match st.f_type as i64 {
        PROC_SUPER_MAGIC => Some("a procfs file"),
        SYSFS_MAGIC => Some("a sysfs file"),
        _ => None,
    }
}

#[cfg(not(target_os = "linux"))]
fn pseudo_file_system(_: &File) -> Option<&'static str> {
    None
}

fn not_regular(path: &Path, kind: &str) -> Error {
    Error::io(
        path,
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{kind}, not a regular file"),
        ),
    )
}

/// Opens `path` for reading when it is a regular file (symbolic links followed), and returns it
/// with its size. Devices (`/dev/zero`), FIFOs, sockets, directories and procfs/sysfs files
/// (whose size is 0 whatever they hold) are refused with an error naming their kind, without
/// reading them and without blocking (a FIFO is opened non-blocking).
pub fn open_regular_file(path: &Path) -> Result<(File, u64)> {
    let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if let Some(kind) = non_regular_kind(meta.file_type()) {
        return Err(not_regular(path, kind));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Swapped for a FIFO after the check above, the open still does not block.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if let Some(kind) = non_regular_kind(meta.file_type()).or_else(|| pseudo_file_system(&file)) {
        return Err(not_regular(path, kind));
    }
    Ok((file, meta.len()))
}

/// Reads the regular file `path` whole (see [`open_regular_file`]), refusing one larger than
/// `max_len` bytes before reading it (for small files such as passphrases).
pub fn read_small_regular_file(path: &Path, max_len: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular_file(path)?;
    if len > max_len {
        return Err(Error::io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{len} bytes: larger than the {max_len} bytes allowed"),
            ),
        ));
    }
    let mut out = Vec::with_capacity(len as usize);
    // `take`: a file that grows while it is read is cut at the limit, then refused below.
    file.take(max_len + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > max_len {
        return Err(not_regular(path, "a file larger than allowed"));
    }
    Ok(out)
}

impl MappedFile {
    /// Maps `path` read-only (an empty file maps to an empty slice). Only regular files are
    /// accepted (see [`open_regular_file`]).
    pub fn open(path: &Path) -> Result<Arc<Self>> {
        let (file, len) = open_regular_file(path)?;
        if len == 0 {
            return Ok(Arc::new(Self {
                map: None,
                file: None,
            }));
        }
        // SAFETY: the map is read-only and private to this process; the library never writes
        // files it has mapped (saves go to a temporary file that is renamed over the old one).
        // Another process truncating the file while it is mapped is outside this contract and is
        // documented (SIGBUS), as for every mmap-based loader.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| match e.kind() {
            io::ErrorKind::OutOfMemory => Error::alloc_failed(len, "a map of the file"),
            _ => Error::io(path, e),
        })?;
        Ok(Arc::new(Self {
            map: Some(map),
            file: Some(file),
        }))
    }

    /// Fills `buf` with the file's bytes at `offset` by a positional read (no page of the map
    /// is touched); `false` when the read fails or comes up short (the file changed).
    pub fn read_at(&self, offset: usize, buf: &mut [u8]) -> bool {
        self.file
            .as_ref()
            .is_some_and(|f| read_exact_at(f, buf, offset as u64).is_ok())
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.as_ref()
    }

    /// Drops this process's page mappings of `offset..offset+len` (page-aligned start) so they no
    /// longer count in its resident memory; the bytes stay readable (they are faulted in again
    /// from the page cache on the next access).
    pub fn release_range(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            // SAFETY: the mapping is a private, read-only file mapping that this process never
            // writes, so MADV_DONTNEED discards nothing: later reads see the file's bytes again.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
            };
        }
        // Elsewhere the pages simply stay mapped until the map is dropped.
        #[cfg(not(unix))]
        let _ = (offset, len);
    }
}

/// Reads a whole regular file into memory (see [`open_regular_file`]); a buffer that cannot be
/// allocated is [`Error::OutOfMemory`].
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let (mut file, len) = open_regular_file(path)?;
    let len = usize::try_from(len).map_err(|_| Error::alloc_failed(len, "the file"))?;
    let mut out = crate::error::try_vec_with_capacity(len, "the file")?;
    file.read_to_end(&mut out).map_err(|e| Error::io(path, e))?;
    Ok(out)
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
        Self {
            inner,
            written: 0,
            error: None,
        }
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

/// Files and buffers below this size are read/copied without the arena's huge pages and threads.
const ARENA_PARALLEL_MIN_BYTES: usize = 8 << 20;
/// Piece size of parallel reads and copies.
const ARENA_CHUNK_BYTES: usize = 8 << 20;

/// One memory region holding a whole file, from 8 MiB an anonymous mapping of `mem` (transparent
/// huge pages where the kernel allows; kept for the next load when freed): the read buffer of `FileLoadMode::Buffered` no-copy loads (read in parallel), whose
/// payloads borrow from it. Freed when the last payload is gone.
pub struct Arena {
    storage: ArenaStorage,
    base: *mut u8,
    len: usize,
}

/// Where an arena's bytes live: small ones on the heap, large ones in their own mapping.
enum ArenaStorage {
    Empty,
    Heap(Box<[u8]>),
    Map(ReusableMap),
}

// SAFETY: the arena owns its mapping; `base` points into it. Shared access through `&Arena`
// only reads (via `AsRef<[u8]>`); writes happen before the arena is shared (`fill`).
unsafe impl Send for Arena {}
// SAFETY: see `Send`.
unsafe impl Sync for Arena {}

impl Arena {
    /// A region of `len` bytes for [`Arena::fill`] to write every one of (a mapping taken back
    /// holds an earlier load's bytes until then).
    fn new(len: usize) -> io::Result<Self> {
        if len == 0 {
            return Ok(Self {
                storage: ArenaStorage::Empty,
                base: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            });
        }
        if len < ARENA_PARALLEL_MIN_BYTES {
            let mut heap = vec![0u8; len].into_boxed_slice();
            let base = heap.as_mut_ptr();
            return Ok(Self {
                storage: ArenaStorage::Heap(heap),
                base,
                len,
            });
        }
        let mut map = ReusableMap::new(len)?;
        let base = map.as_mut_ptr();
        Ok(Self {
            storage: ArenaStorage::Map(map),
            base,
            len,
        })
    }

    /// Fills the region with `fill(offset, piece)` over pieces of at most `ARENA_CHUNK_BYTES`,
    /// on `threads` threads.
    fn fill<F>(&mut self, threads: usize, fill: F) -> io::Result<()>
    where
        F: Fn(u64, &mut [u8]) -> io::Result<()> + Sync,
    {
        let bytes: &mut [u8] = match &mut self.storage {
            ArenaStorage::Empty => return Ok(()),
            ArenaStorage::Heap(heap) => heap,
            ArenaStorage::Map(map) => map,
        };
        if threads <= 1 || bytes.len() < ARENA_PARALLEL_MIN_BYTES {
            bytes
                .chunks_mut(ARENA_CHUNK_BYTES)
                .enumerate()
                .try_for_each(|(i, piece)| fill((i * ARENA_CHUNK_BYTES) as u64, piece))?;
        } else {
            use par::prelude::*;
            let pool = thread_pool(threads)
                .ok_or_else(|| io::Error::other("cannot start worker threads"))?;
            pool.install(|| {
                bytes
                    .par_chunks_mut(ARENA_CHUNK_BYTES)
                    .enumerate()
                    .try_for_each(|(i, piece)| fill((i * ARENA_CHUNK_BYTES) as u64, piece))
            })?;
        }
        if let ArenaStorage::Map(map) = &mut self.storage {
            map.note_written(self.len);
        }
        Ok(())
    }

    /// Reads the whole file at `path` into a new arena, with `threads` parallel copies.
    ///
    /// The file is memory-mapped and copied piece by piece; each piece of the mapping is
    /// released right after its copy, so the file's pages never add up in the process's resident
    /// memory (peak RSS stays about one file size, not two).
    pub fn read_file(path: &Path, threads: usize) -> Result<Arc<Self>> {
        let source = MappedFile::open(path)?;
        let src = source.bytes();
        let mut arena = Self::new(src.len())
            .map_err(|_| Error::alloc_failed(src.len(), "a copy of the file"))?;
        arena
            .fill(threads, |offset, piece| {
                let start = offset as usize;
                piece.copy_from_slice(&src[start..start + piece.len()]);
                source.release_range(start, piece.len());
                Ok(())
            })
            .map_err(|e| Error::io(path, e))?;
        Ok(Arc::new(arena))
    }
}

impl AsRef<[u8]> for Arena {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `base..base+len` is the live mapping owned by `self`; see the `Send`/`Sync`
        // comment for why no write overlaps a read through this slice.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }
}
