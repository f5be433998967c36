//! Positional reads and writes: any number of threads may read or write one file at once.
//!
//! On Unix they are `pread` / `pwrite` and leave the file cursor alone; on Windows they are
//! `ReadFile` / `WriteFile` at an offset (`seek_read` / `seek_write`), which also move the cursor,
//! so callers never mix them with cursor-based I/O on the same handle at the same time.

use std::fs::File;
use std::io;

/// Makes `file` (empty, open for writing) `len` bytes long, ready for positional writes all over
/// it. On Linux the blocks are allocated up front (`fallocate`: a full disk fails here, before
/// anything is written, and the unwritten blocks read as zeros); buffered writes into the holes
/// of a file merely extended (`set_len`) cost ext4 about four times the CPU time (the kernel
/// zeroes the new page-cache folios around each copy: 1.27 s against 0.13 s for 1 GiB in 8 MiB
/// pieces on the benchmark machine). Elsewhere, or where the file system cannot allocate ahead,
/// the file is extended.
pub(crate) fn presize(file: &File, len: u64) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if len > 0 {
        use std::os::fd::AsRawFd;
        let size = libc::off_t::try_from(len).map_err(|_| io::ErrorKind::FileTooLarge)?;
        // SAFETY: `fallocate` on a descriptor we own; mode 0 allocates and extends the file.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) {
            return Err(e);
        }
    }
    file.set_len(len)
}

/// Reads exactly `buf.len()` bytes at `offset` (positional: the file cursor is not used, so any
/// number of threads may read one file at once).
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_read(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

/// Maps the pages of `buf` into the process before a write reads them. A buffered write copies
/// from the caller with page faults disabled; when the source is a file mapping not touched yet
/// (a no-copy model's tensors), the copy stops at the first unmapped page, the kernel zeroes the
/// page-cache folio it had prepared, faults the source in and starts again: ext4 spent half of a
/// 3 GB save in that zeroing. `MADV_POPULATE_READ` (Linux 5.14) maps the range in one call
/// (memory already mapped costs a walk of its page tables); where it is unknown, nothing is done.
fn populate(buf: &[u8]) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if !buf.is_empty() {
        const PAGE: usize = 4096;
        let start = buf.as_ptr() as usize / PAGE * PAGE;
        let end = buf.as_ptr() as usize + buf.len();
        // SAFETY: the range covers the pages holding `buf`, which are mapped (we hold a
        // reference to their bytes); MADV_POPULATE_READ only maps them, changing no contents.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_READ,
            );
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = buf;
}

/// Size of each write system call of [`write_all_at`]. The kernel's page cache takes a buffered
/// write into folios as large as the write (Linux 6.x, ext4/xfs: up to 2 MiB); a large folio
/// needs a free 2 MiB block of memory, and in virtual machines whose free memory is handed back
/// to the host (virtio-balloon free page reporting) exactly those blocks are the ones the host
/// must fault in again on first touch. Measured on such a KVM guest (Linux 6.18, ext4), a 3 GB
/// weight file written in 8 MiB calls took 0.55–0.8 s of system time when the memory was
/// recently used, but 6–7.4 s (14 s wall) after another program had written and deleted a file
/// of that size; in 64 KiB calls it took 0.76–1.05 s either way. (onnx-ir's `copy_file_range`
/// writes page by page, which is why its save was steadier.)
#[cfg(unix)]
const WRITE_CALL: usize = 64 << 10;

/// Writes all of `buf` at `offset` (positional, like [`read_exact_at`]), in calls of at most
/// [`WRITE_CALL`] bytes (Unix; Windows writes what `seek_write` takes).
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    populate(buf);
    #[cfg(unix)]
    {
        let mut offset = offset;
        for call in buf.chunks(WRITE_CALL) {
            std::os::unix::fs::FileExt::write_all_at(file, call, offset)?;
            offset += call.len() as u64;
        }
        Ok(())
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_write(buf, offset)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}
