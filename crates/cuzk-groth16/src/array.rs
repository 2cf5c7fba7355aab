//! Arrays of plain numbers that live either in a vector of their own or in a shared
//! copy of a file's bytes (the compiled constraint matrices: gigabytes, read once when
//! their set loads and shared by every proof of it).
//!
//! The file is copied, not memory-mapped: a file truncated or rewritten in place while
//! mapped (`cp` over it, `rsync --inplace`) would kill the process with SIGBUS at the
//! next read of a page that is gone. A copy keeps what was read, whatever happens to
//! the file.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use rayon::prelude::*;

/// Number types a file may hold: any bit pattern is a valid value.
pub trait Plain: Copy + Send + Sync + 'static {}
impl Plain for u16 {}
impl Plain for u32 {}
impl Plain for u64 {}

/// A file's bytes in memory, 8-byte aligned (so every section a file format aligns
/// to 8 bytes can be read as numbers in place).
pub struct FileBytes {
    words: Vec<u64>,
    len: usize,
}

/// Bytes read per parallel task.
const READ_CHUNK: usize = 64 << 20;

impl FileBytes {
    /// Reads the whole of `file` (its length when asked), in parallel chunks. A file
    /// that shrinks meanwhile is an `UnexpectedEof` error.
    pub fn read(file: &File) -> io::Result<Self> {
        let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::Error::other("the file is larger than memory can address"))?;
        let mut words = vec![0u64; len.div_ceil(8)];
        let bytes = &mut as_bytes_mut(&mut words)[..len];
        bytes.par_chunks_mut(READ_CHUNK).enumerate().try_for_each(|(k, chunk)| file.read_exact_at(chunk, (k * READ_CHUNK) as u64))?;
        Ok(FileBytes { words, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: the byte view covers exactly the words' memory, borrowed mutably for as
    // long as the view; u8 has no alignment or validity requirement.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` ≤ the words' byte size (set by `read`); u8 has no alignment or
        // validity requirement; the words live as long as self.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

/// `len` values of `T`, owned or in a shared copy of a file.
pub enum Array<T: Plain> {
    Owned(Vec<T>),
    /// `len` values starting `offset` bytes into `bytes`.
    InFile {
        bytes: Arc<FileBytes>,
        offset: usize,
        len: usize,
    },
}

// Files hold little-endian numbers; a file's bytes are read as native numbers.
#[cfg(not(target_endian = "little"))]
compile_error!("arrays in file bytes assume a little-endian host");

impl<T: Plain> Array<T> {
    /// The values `offset..offset + len * size_of::<T>()` of `bytes`, or `None` when
    /// that range is out of them or not aligned for `T`.
    pub fn in_file(bytes: Arc<FileBytes>, offset: usize, len: usize) -> Option<Self> {
        let size = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(size)?;
        let aligned = (bytes.as_ptr() as usize + offset) % std::mem::align_of::<T>() == 0;
        (end <= bytes.len() && aligned).then_some(Array::InFile { bytes, offset, len })
    }

    /// The vector of an owned array (converting one in a file into an owned copy).
    pub fn owned_mut(&mut self) -> &mut Vec<T> {
        if let Array::InFile { .. } = self {
            *self = Array::Owned(self.to_vec());
        }
        match self {
            Array::Owned(v) => v,
            Array::InFile { .. } => unreachable!("converted above"),
        }
    }
}

impl<T: Plain> Deref for Array<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Array::Owned(v) => v,
            // SAFETY: `in_file` checked that offset..offset + len·size_of::<T>() lies in
            // the bytes and is aligned for T; every bit pattern is a valid T (Plain);
            // the bytes are never written after `FileBytes::read` and live as long as
            // self (the Arc).
            Array::InFile { bytes, offset, len } => unsafe { std::slice::from_raw_parts(bytes.as_ptr().add(*offset).cast::<T>(), *len) },
        }
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Array<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array({} values{})", self.len(), if matches!(self, Array::InFile { .. }) { ", in a file's copy" } else { "" })
    }
}

impl<T: Plain + PartialEq> PartialEq for Array<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Plain + Eq> Eq for Array<T> {}

impl<T: Plain> Clone for Array<T> {
    fn clone(&self) -> Self {
        match self {
            Array::Owned(v) => Array::Owned(v.clone()),
            Array::InFile { bytes, offset, len } => Array::InFile { bytes: bytes.clone(), offset: *offset, len: *len },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn an_array_in_a_file_reads_it_refuses_bad_ranges_and_outlives_its_truncation() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let values: Vec<u32> = (0..100).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_all(&bytes).unwrap();
        let copy = Arc::new(FileBytes::read(f.as_file()).unwrap());
        let a = Array::<u32>::in_file(copy.clone(), 8, 98).unwrap();
        assert_eq!(&a[..], &values[2..]);
        assert_eq!(a, Array::Owned(values[2..].to_vec()));
        assert!(Array::<u32>::in_file(copy.clone(), 8, 99).is_none(), "past the end");
        assert!(Array::<u32>::in_file(copy.clone(), 2, 1).is_none(), "misaligned");
        let mut b = a.clone();
        b.owned_mut().push(7);
        assert_eq!((b.len(), a.len()), (99, 98), "a copy when written");
        // Truncated in place (a mapping's reads would now raise SIGBUS): the copy stays.
        f.as_file().set_len(0).unwrap();
        assert_eq!(&a[..], &values[2..]);
    }
}
