//! Arrays of plain numbers that live either in memory or in a memory-mapped file (the
//! compiled constraint matrices: gigabytes, read once per proof, shared through the
//! page cache).

use std::ops::Deref;
use std::sync::Arc;

/// Number types a mapped file may hold: any bit pattern is a valid value.
pub trait Plain: Copy + Send + Sync + 'static {}
impl Plain for u16 {}
impl Plain for u32 {}
impl Plain for u64 {}

/// `len` values of `T`, owned or in a mapping.
pub enum Array<T: Plain> {
    Owned(Vec<T>),
    /// `len` values starting `offset` bytes into `map`.
    Mapped {
        map: Arc<memmap2::Mmap>,
        offset: usize,
        len: usize,
    },
}

// Files hold little-endian numbers; a mapping is read as native numbers.
#[cfg(not(target_endian = "little"))]
compile_error!("mapped arrays assume a little-endian host");

impl<T: Plain> Array<T> {
    /// The values `offset..offset + len * size_of::<T>()` of `map`, or `None` when that
    /// range is out of the mapping or not aligned for `T`.
    pub fn mapped(map: Arc<memmap2::Mmap>, offset: usize, len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        let aligned = (map.as_ptr() as usize + offset) % std::mem::align_of::<T>() == 0;
        (end <= map.len() && aligned).then_some(Array::Mapped { map, offset, len })
    }

    /// The vector of an owned array (converting a mapped one into an owned copy).
    pub fn owned_mut(&mut self) -> &mut Vec<T> {
        if let Array::Mapped { .. } = self {
            *self = Array::Owned(self.to_vec());
        }
        match self {
            Array::Owned(v) => v,
            Array::Mapped { .. } => unreachable!("converted above"),
        }
    }
}

impl<T: Plain> Deref for Array<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Array::Owned(v) => v,
            // SAFETY: `mapped` checked that offset..offset + len·size_of::<T>() lies in
            // the mapping and is aligned for T; every bit pattern is a valid T (Plain);
            // the mapping is read-only and lives as long as self (the Arc).
            Array::Mapped { map, offset, len } => unsafe { std::slice::from_raw_parts(map.as_ptr().add(*offset).cast::<T>(), *len) },
        }
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Array<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array({} values{})", self.len(), if matches!(self, Array::Mapped { .. }) { ", mapped" } else { "" })
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
            Array::Mapped { map, offset, len } => Array::Mapped { map: map.clone(), offset: *offset, len: *len },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_array_reads_the_file_and_refuses_bad_ranges() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let values: Vec<u32> = (0..100).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_all(&bytes).unwrap();
        let map = Arc::new(crate::format::map_file(f.path()).unwrap());
        let a = Array::<u32>::mapped(map.clone(), 8, 98).unwrap();
        assert_eq!(&a[..], &values[2..]);
        assert_eq!(a, Array::Owned(values[2..].to_vec()));
        assert!(Array::<u32>::mapped(map.clone(), 8, 99).is_none(), "past the end");
        assert!(Array::<u32>::mapped(map.clone(), 2, 1).is_none(), "misaligned");
        let mut b = a.clone();
        b.owned_mut().push(7);
        assert_eq!((b.len(), a.len()), (99, 98), "a copy when written");
    }
}
