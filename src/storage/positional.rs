//! Positional reads and writes: any number of threads may read or write one file at once.
//!
//! On Unix they are `pread` / `pwrite` and leave the file cursor alone; on Windows they are
//! `ReadFile` / `WriteFile` at an offset (`seek_read` / `seek_write`), which also move the cursor,
//! so callers never mix them with cursor-based I/O on the same handle at the same time.

use std::fs::File;
use std::io;

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

/// Writes all of `buf` at `offset` (positional, like [`read_exact_at`]).
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
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
