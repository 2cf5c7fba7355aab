//! A scalar vector in compact form on the device (kernels/msm/compact.cuh): its 0 / 1
//! class bitmaps, each 64-bit word's first other value, and the other values in order.
//! Split lists are built from it (crate::msm::split) and the prover's products read it
//! (crate::groth16::products) in place: the expanded vector is never made.
//!
//! It lives in an area the caller owns (a staging slot's, reused by every partition, so
//! no per-partition allocation), laid out by [`CompactLayout`]. Where the other values
//! do not fit the area, only the bitmaps and offsets go up; whoever reads other values
//! then sends a window of them next to where it reads them ([`CompactView::others_at`]).

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView};
use cuzk_groth16::synthesis::ScalarClasses;

use super::pippenger::blocks;
use crate::device::{Gpu, GpuError};
use crate::field::{as_device, DeviceFr};

/// Words of the bitmaps per block of `compact_word_offsets` (COMPACT_OFFSET_THREADS).
const OFFSET_WORDS: usize = 256;
/// Each part of an area starts at a multiple of 256 bytes (32 u64 words).
const ALIGN_WORDS: usize = 32;

fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8).next_multiple_of(ALIGN_WORDS)
}

/// Where each part of a compact vector of `len` scalars (and `extra` leading plain
/// scalars, e.g. a witness's inputs) sits in an area of u64 words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactLayout {
    /// Plain scalars before the vector.
    pub lead_len: usize,
    pub len: usize,
    /// Other values: how many the vector has, and whether they are in the area.
    pub others: usize,
    pub others_resident: bool,
    lead: Range<usize>,
    one: Range<usize>,
    zero: Range<usize>,
    offsets: Range<usize>,
    block_first: Range<usize>,
    values: Range<usize>,
}

impl CompactLayout {
    /// The layout of `lead` plain scalars, then a compact vector of `len` scalars with
    /// `others` other values, kept in the area when `others_resident`.
    pub fn new(lead: usize, len: usize, others: usize, others_resident: bool) -> Self {
        let words = len.div_ceil(64);
        let mut at = 0;
        let mut part = |bytes: usize| {
            let r = at..at + words_for(bytes);
            at = r.end;
            r
        };
        let lead_r = part(lead * 32);
        let one = part(words * 8);
        let zero = part(words * 8);
        let block_first = part(words.div_ceil(OFFSET_WORDS) * 4);
        let offsets = part(words * 4);
        let values = part(if others_resident { others.max(1) * 32 } else { 0 });
        CompactLayout { lead_len: lead, len, others, others_resident, lead: lead_r, one, zero, offsets, block_first, values }
    }

    /// Words of area it takes.
    pub fn words(&self) -> usize {
        self.values.end
    }

    /// Bytes of area it takes.
    pub fn bytes(&self) -> usize {
        8 * self.words()
    }

    /// Bytes of area a vector of `len` scalars takes without its other values: the
    /// least an area must hold.
    pub fn least_bytes(lead: usize, len: usize) -> usize {
        CompactLayout::new(lead, len, 0, false).bytes()
    }
}

/// A compact vector in an area, as kernels read it.
pub struct CompactView<'a> {
    pub layout: &'a CompactLayout,
    pub lead: CudaView<'a, DeviceFr>,
    pub one: CudaView<'a, u64>,
    pub zero: CudaView<'a, u64>,
    pub offsets: CudaView<'a, u32>,
    /// The other values when resident.
    pub others: Option<CudaView<'a, DeviceFr>>,
}

impl<'a> CompactView<'a> {
    /// The views of `layout`'s parts of `area`.
    pub fn of(area: &'a CudaSlice<u64>, layout: &'a CompactLayout) -> Result<Self, GpuError> {
        if area.len() < layout.words() {
            return Err(GpuError::Invalid(format!("an area of {} words for a compact vector of {}", area.len(), layout.words())));
        }
        let words = layout.len.div_ceil(64);
        let short = || GpuError::Invalid("compact area parts too small".into());
        let view = |r: &Range<usize>| area.slice(r.clone());
        // SAFETY: (all four) the parts were sized for these element counts by
        // CompactLayout::new; every element was written by `upload` (the bitmaps and
        // values copied, the offsets by compact_word_offsets) before a kernel reads it.
        let (lead, offsets) = unsafe {
            (
                view(&layout.lead).transmute::<DeviceFr>(layout.lead_len).ok_or_else(short)?,
                view(&layout.offsets).transmute::<u32>(words).ok_or_else(short)?,
            )
        };
        let others = if layout.others_resident {
            // SAFETY: as above.
            Some(unsafe { view(&layout.values).transmute::<DeviceFr>(layout.others.max(1)).ok_or_else(short)? })
        } else {
            None
        };
        Ok(CompactView { layout, lead, one: view(&layout.one).slice(..words), zero: view(&layout.zero).slice(..words), offsets, others })
    }
}

/// The scalars' host side: `lead` plain scalars, then the compact vector's bitmaps and
/// other values.
pub struct HostCompact<'h> {
    pub lead: &'h [blstrs::Scalar],
    pub classes: &'h ScalarClasses,
    pub len: usize,
    pub others: &'h [blstrs::Scalar],
}

impl HostCompact<'_> {
    /// Each offset block's first other value (popcounts of the host's bitmaps), and
    /// the count of other values the bitmaps mark.
    fn block_first(&self) -> Result<(Vec<u32>, usize), GpuError> {
        let n = self.len;
        let words = n.div_ceil(64);
        let (one, zero) = (self.classes.one.words(), self.classes.zero.words());
        if one.len() < words || zero.len() < words {
            return Err(GpuError::Invalid(format!("{n} scalars with class bitmaps of {} and {} words", one.len(), zero.len())));
        }
        let mut block_first = Vec::with_capacity(words.div_ceil(OFFSET_WORDS));
        let mut seen = 0usize;
        for (w, (o, z)) in one[..words].iter().zip(&zero[..words]).enumerate() {
            if w % OFFSET_WORDS == 0 {
                block_first.push(seen as u32);
            }
            let valid = if (w + 1) * 64 <= n { u64::MAX } else { (1u64 << (n % 64)) - 1 };
            seen += (!o & !z & valid).count_ones() as usize;
            if seen >= 1 << 32 {
                return Err(GpuError::Invalid(format!("more than 2^32 other values in {n} scalars")));
            }
        }
        if seen != self.others.len() {
            return Err(GpuError::Invalid(format!("the bitmaps mark {seen} other values, the vector has {}", self.others.len())));
        }
        Ok((block_first, seen))
    }

    /// Sends the vector into `area` on `stream` as `layout` lays it out (from pageable
    /// memory: the driver has the bytes when the call returns), then fills the offsets
    /// there. Returns the bytes sent. `layout` must be this vector's
    /// ([`HostCompact::layout`]).
    pub fn upload(&self, gpu: &Gpu, stream: &Arc<CudaStream>, area: &mut CudaSlice<u64>, layout: &CompactLayout) -> Result<u64, GpuError> {
        let (block_first, others) = self.block_first()?;
        if layout.len != self.len || layout.others != others || layout.lead_len != self.lead.len() {
            return Err(GpuError::Invalid("a compact layout made for another vector".into()));
        }
        if area.len() < layout.words() {
            return Err(GpuError::Invalid(format!("an area of {} words for a compact vector of {}", area.len(), layout.words())));
        }
        let words = self.len.div_ceil(64);
        let as_words = |s: &[blstrs::Scalar]| -> &[u64] {
            let d = as_device(s);
            // SAFETY: the scalars are blstrs' four u64 limbs each (8-byte aligned, every bit
            // pattern a valid u64), the same bytes the device form holds.
            unsafe { std::slice::from_raw_parts(d.as_ptr() as *const u64, d.len() * 4) }
        };
        let mut sent = 0u64;
        let mut put = |area: &mut CudaSlice<u64>, at: &Range<usize>, src: &[u64]| -> Result<(), GpuError> {
            if !src.is_empty() {
                stream.memcpy_htod(src, &mut area.slice_mut(at.start..at.start + src.len()))?;
                sent += 8 * src.len() as u64;
            }
            Ok(())
        };
        put(area, &layout.lead, as_words(self.lead))?;
        put(area, &layout.one, &self.classes.one.words()[..words])?;
        put(area, &layout.zero, &self.classes.zero.words()[..words])?;
        let bf: Vec<u64> = block_first.chunks(2).map(|p| p[0] as u64 | (p.get(1).copied().unwrap_or(0) as u64) << 32).collect();
        put(area, &layout.block_first, &bf)?;
        if layout.others_resident {
            put(area, &layout.values, as_words(self.others))?;
        }
        if words > 0 {
            let n64 = self.len as u64;
            let (head, mut tail) = area.split_at_mut(layout.offsets.start);
            let (one, zero) = (head.slice(layout.one.start..layout.one.start + words), head.slice(layout.zero.start..layout.zero.start + words));
            let first = head.slice(layout.block_first.clone());
            let short = || GpuError::Invalid("compact area parts too small".into());
            let mut off_place = tail.slice_mut(..layout.offsets.len());
            // SAFETY: block_first holds one u32 per block (packed two to a word above);
            // the offsets part holds `words` u32, each written by the kernel below.
            let (first, mut offsets) =
                unsafe { (first.transmute::<u32>(block_first.len()).ok_or_else(short)?, off_place.transmute_mut::<u32>(words).ok_or_else(short)?) };
            // SAFETY: the bitmaps hold ⌈n/64⌉ words, block_first one entry per block of 256
            // words, offsets ⌈n/64⌉ entries.
            unsafe { gpu.k.compact_word_offsets(stream, blocks(words as u64, OFFSET_WORDS as u32), &one, &zero, n64, &first, &mut offsets)? };
        }
        Ok(sent)
    }

    /// Its layout with the other values resident when the whole takes at most
    /// `area_bytes`, else without them (None if not even that fits).
    pub fn layout(&self, area_bytes: usize) -> Option<CompactLayout> {
        let whole = CompactLayout::new(self.lead.len(), self.len, self.others.len(), true);
        if whole.bytes() <= area_bytes {
            return Some(whole);
        }
        let least = CompactLayout::new(self.lead.len(), self.len, self.others.len(), false);
        (least.bytes() <= area_bytes).then_some(least)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_aligned_and_count_what_they_hold() {
        let n = 130_169_893;
        let l = CompactLayout::new(328, n, 1_700_000, true);
        for r in [&l.lead, &l.one, &l.zero, &l.block_first, &l.offsets, &l.values] {
            assert_eq!(r.start % ALIGN_WORDS, 0);
        }
        // A 32 GiB PoRep partition: two 16 MB bitmaps, 8 MB of offsets, 54 MB of others.
        let b = l.bytes() as f64 / 1e6;
        assert!((94.0..96.0).contains(&b), "{b}");
        let least = CompactLayout::least_bytes(328, n);
        assert_eq!(least, CompactLayout::new(328, n, 1_700_000, false).bytes());
        let least_mb = least as f64 / 1e6;
        assert!((40.0..42.0).contains(&least_mb), "{least_mb}");
    }
}
