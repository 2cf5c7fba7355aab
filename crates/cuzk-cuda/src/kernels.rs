//! The fatbin's kernels as one typed table: each kernel's name and argument types are
//! written once, here, beside the kernel's C signature; the table loads every kernel
//! by its name at start and launches each through a method of those types, so a
//! launch site states only the grid and its bounds.
//!
//! An argument is `in T` (`const T*`: a slice, a view, an address the caller worked out,
//! or an optional one), `out T` (`T*`: a mutable slice or view, or an address) or
//! `val T` (by value).
//! Stream ordering is cudarc's, as for its own launch arguments.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, DriverError, LaunchArgs, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};

use crate::field::{DeviceFp, DeviceFr};

/// A curve group's device types, as its kernels read and write them (the MSM's groups,
/// `crate::msm::MsmGroup`, are these and more), and the suffix of its kernels' names.
pub trait CurveTypes {
    /// The affine point's bytes as the device reads them (x then y, coordinates as
    /// 12-limb Fp elements, c0 before c1 in Fp2): exactly the host type's bytes.
    type DeviceAffine: DeviceRepr + ValidAsZeroBits + Copy + Unpin + Send + Sync;
    /// An XYZZ point (x, y, zz, zzz).
    type DeviceXyzz: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin;
    /// One coordinate (Fp or Fp2, Montgomery form): the batch-affine rounds' products.
    type DeviceField: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin;
    /// "g1", "g2": the kernels are `msm_accumulate_g1`, `fixed_base_mul_g2`, ….
    const SUFFIX: &'static str;
}

/// N 32-bit words of device memory: affine and XYZZ points of either group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct Words<const N: usize>(pub [u32; N]);

impl<const N: usize> Default for Words<N> {
    fn default() -> Self {
        Words([0; N])
    }
}

// SAFETY: plain old data; the kernels' ec::affine / ec::xyzz have these layouts.
unsafe impl<const N: usize> DeviceRepr for Words<N> {}
// SAFETY: all-zero bits are the point at infinity in both forms.
unsafe impl<const N: usize> ValidAsZeroBits for Words<N> {}

/// G1 over Fp.
pub struct G1;
/// G2 over Fp2.
pub struct G2;

impl CurveTypes for G1 {
    type DeviceAffine = Words<24>;
    type DeviceXyzz = Words<48>;
    type DeviceField = Words<12>;
    const SUFFIX: &'static str = "g1";
}

impl CurveTypes for G2 {
    type DeviceAffine = Words<48>;
    type DeviceXyzz = Words<96>;
    type DeviceField = Words<24>;
    const SUFFIX: &'static str = "g2";
}

/// A `const T*` argument: a slice, a view, an address ([`At`]), or an optional one of
/// these (None: a null pointer).
pub(crate) trait InArg<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>);
}

/// A `T*` argument: a mutable slice or view, or an address ([`At`]).
pub(crate) trait OutArg<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>);
}

/// A device address the caller worked out, as a `T` pointer (a base shifted before a
/// piece's first entry, outputs in an arena): the kernel's bounds are the caller's to
/// keep, and so is its ordering against other streams.
pub(crate) struct At<T>(u64, PhantomData<T>);

impl<T> At<T> {
    pub(crate) fn new(address: u64) -> Self {
        At(address, PhantomData)
    }
}

impl<T> InArg<T> for &CudaSlice<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(*self);
    }
}

impl<T> InArg<T> for &CudaView<'_, T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(*self);
    }
}

impl<T> InArg<T> for At<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(&self.0);
    }
}

/// The null pointer an absent optional argument is.
static NULL: u64 = 0;

impl<T, A: InArg<T>> InArg<T> for Option<A> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        match self {
            Some(a) => a.push(b),
            None => {
                b.arg(&NULL);
            }
        }
    }
}

impl<T> OutArg<T> for &mut CudaSlice<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(&mut **self);
    }
}

impl<T> OutArg<T> for &mut CudaViewMut<'_, T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(&mut **self);
    }
}

impl<T> OutArg<T> for At<T> {
    fn push<'b>(&'b mut self, b: &mut LaunchArgs<'b>) {
        b.arg(&self.0);
    }
}

/// The parameter type of each argument kind, and how it is pushed.
macro_rules! arg_type {
    (in $t:ty) => { impl InArg<$t> };
    (out $t:ty) => { impl OutArg<$t> };
    (val $t:ty) => { $t };
}
macro_rules! arg_push {
    (in $a:ident, $b:ident) => {
        InArg::push(&mut $a, &mut $b)
    };
    (out $a:ident, $b:ident) => {
        OutArg::push(&mut $a, &mut $b)
    };
    (val $a:ident, $b:ident) => {
        $b.arg(&$a)
    };
}

/// Declares a table of kernels: a struct of `CudaFunction`s loaded by name (the name
/// followed by a suffix), and one launch method per kernel with its argument types.
/// `[G: CurveTypes]` makes the table one group's (`CurveKernels<G1>`: its methods take
/// that group's device types, its names end in `G::SUFFIX`); `[]` makes a plain one.
macro_rules! kernel_table {
    (
        [$($g:ident: $bound:path)?]
        $(#[$doc:meta])*
        $vis:vis struct $table:ident {
            $(
                $(#[$kdoc:meta])*
                $field:ident = $name:literal ( $( $arg:ident : $mode:ident $t:ty ),* $(,)? );
            )*
        }
    ) => {
        $(#[$doc])*
        $vis struct $table $(<$g: $bound>)? {
            $( $field: CudaFunction, )*
            _group: PhantomData<($($g,)?)>,
        }

        impl $(<$g: $bound>)? $table $(<$g>)? {
            pub(crate) fn load(m: &Arc<CudaModule>, suffix: &str) -> Result<Self, DriverError> {
                Ok($table { $( $field: m.load_function(&format!("{}{suffix}", $name))?, )* _group: PhantomData })
            }

            /// Every kernel of the table.
            pub(crate) fn all(&self) -> Vec<&CudaFunction> {
                vec![$( &self.$field ),*]
            }

            $( kernel_method! { $(#[$kdoc])* $field ( $( $arg : $mode $t ),* ) } )*
        }
    };
}

/// One launch method of a [`kernel_table!`].
macro_rules! kernel_method {
    ($(#[$kdoc:meta])* $field:ident ( $( $arg:ident : $mode:ident $t:ty ),* )) => {
        $(#[$kdoc])*
        ///
        /// # Safety
        /// The grid must keep within what every pointer argument holds (each launch
        /// site says why it does).
        #[allow(clippy::too_many_arguments, unused_mut)]
        pub(crate) unsafe fn $field(&self, stream: &CudaStream, cfg: LaunchConfig, $( mut $arg: arg_type!($mode $t) ),*) -> Result<(), DriverError> {
            let mut b = stream.launch_builder(&self.$field);
            $( arg_push!($mode $arg, b); )*
            // SAFETY: the arguments are those of the kernel's signature, in its order
            // (the table states it once); the bounds are the caller's.
            unsafe { b.launch(cfg) }?;
            Ok(())
        }
    };
}

kernel_table! {
    [G: CurveTypes]
    /// The kernels of one curve group (names ending in `G::SUFFIX`): the MSM's
    /// (kernels/msm/pippenger.cuh), the fixed-base multiplication's
    /// (kernels/ec/fixed_base.cuh) and the `.params` point decoder (kernels/ec/decode.cuh).
    pub struct CurveKernels {
        /// `msm_accumulate(const affine*, const u32*, u32, const u32*, u32, u32, u32,
        /// xyzz*, xyzz*, u32*, xyzz*, u32*)`
        accumulate = "msm_accumulate_"(
            points: in G::DeviceAffine, sorted: in u32, indexed: val u32, offsets: in u32, len: val u32, seg_len: val u32,
            segments: val u32, buckets: out G::DeviceXyzz, left: out G::DeviceXyzz, left_bucket: out u32,
            right: out G::DeviceXyzz, right_bucket: out u32,
        );
        /// `msm_partials_scan(const xyzz*, xyzz*, const u32*, u32, u32)`
        partials_scan = "msm_partials_scan_"(src: in G::DeviceXyzz, dst: out G::DeviceXyzz, bucket: in u32, segments: val u32, d: val u32);
        /// `msm_fixup(u32, xyzz*, const xyzz*, const u32*, const xyzz*, const u32*)`
        fixup = "msm_fixup_"(
            segments: val u32, buckets: out G::DeviceXyzz, right: in G::DeviceXyzz, right_bucket: in u32,
            left_sums: in G::DeviceXyzz, left_bucket: in u32,
        );
        /// `msm_bucket_segments(const xyzz*, u32, u32, u32, xyzz*, xyzz*)`
        bucket_segments = "msm_bucket_segments_"(
            buckets: in G::DeviceXyzz, m: val u32, log_m: val u32, threads: val u32, sums: out G::DeviceXyzz, weighted: out G::DeviceXyzz,
        );
        /// `msm_pair_segments(const xyzz*, const xyzz*, u32, u32, u32, xyzz*, xyzz*)`
        pair_segments = "msm_pair_segments_"(
            sums: in G::DeviceXyzz, weighted: in G::DeviceXyzz, m: val u32, log_m: val u32, count: val u32,
            out_sums: out G::DeviceXyzz, out_weighted: out G::DeviceXyzz,
        );
        /// `msm_combine_windows(const xyzz*, u32, u32, xyzz*)`
        combine_windows = "msm_combine_windows_"(window_sums: in G::DeviceXyzz, windows: val u32, c: val u32, result: out G::DeviceXyzz);
        /// `msm_sum_indexed(const affine*, const u32*, u32, u32, u32, xyzz*)`
        sum_indexed = "msm_sum_indexed_"(bases: in G::DeviceAffine, idx: in u32, count: val u32, per: val u32, threads: val u32, sums: out G::DeviceXyzz);
        /// `msm_sum_pairs(const xyzz*, u32, xyzz*)`
        sum_pairs = "msm_sum_pairs_"(src: in G::DeviceXyzz, m: val u32, dst: out G::DeviceXyzz);
        /// `msm_affine_offsets(const u32*, u32, u32*, affine*)`
        affine_offsets = "msm_affine_offsets_"(in_offsets: in u32, buckets: val u32, out_offsets: out u32, out: out G::DeviceAffine);
        /// `msm_affine_prefix(const affine*, const u32*, u32, const u32*, u32, u32, u32,
        /// const u32*, field*, field*, affine*)`
        affine_prefix = "msm_affine_prefix_"(
            points: in G::DeviceAffine, entries: in u32, indexed: val u32, in_offsets: in u32, buckets: val u32, span: val u32,
            threads: val u32, out_offsets: in u32, prefix: out G::DeviceField, prod: out G::DeviceField, out: out G::DeviceAffine,
        );
        /// `msm_affine_invert(const field*, u32, u32, field*)`
        affine_invert = "msm_affine_invert_"(prod: in G::DeviceField, threads: val u32, group: val u32, inv: out G::DeviceField);
        /// `msm_affine_apply(const affine*, const u32*, u32, const u32*, u32, u32, u32,
        /// const u32*, const field*, const field*, affine*)`
        affine_apply = "msm_affine_apply_"(
            points: in G::DeviceAffine, entries: in u32, indexed: val u32, in_offsets: in u32, buckets: val u32, span: val u32,
            threads: val u32, out_offsets: in u32, prefix: in G::DeviceField, inv: in G::DeviceField, out: out G::DeviceAffine,
        );
        /// `fixed_base_mul(const affine*, u32, u32, const fr*, u32, xyzz*)`
        fixed_base_mul = "fixed_base_mul_"(table: in G::DeviceAffine, window_bits: val u32, windows: val u32, scalars: in DeviceFr, n: val u32, out: out G::DeviceXyzz);
        /// `fixed_base_to_affine(const xyzz*, u32, affine*)`
        fixed_base_to_affine = "fixed_base_to_affine_"(xyzz: in G::DeviceXyzz, n: val u32, out: out G::DeviceAffine);
        /// `decode_points(uint32_t *points, uint32_t n, uint32_t first_index, uint32_t
        /// *first_bad)`: points as `.params` files store them, decoded in place.
        decode_points = "decode_points_"(points: out G::DeviceAffine, n: val u32, first_index: val u32, first_bad: out u32);
    }
}

kernel_table! {
    []
    /// The field, NTT, MSM sorting, split-list, compact-witness and product kernels.
    pub(crate) struct Kernels {
        /// `ntt_bit_reverse(fr*, u32)`
        bit_reverse = "ntt_bit_reverse"(v: out DeviceFr, log_n: val u32);
        /// `ntt_bit_reverse_tiled(fr*, u32)`
        bit_reverse_tiled = "ntt_bit_reverse_tiled"(v: out DeviceFr, log_n: val u32);
        /// `ntt_block(fr*, const twiddle*, u32, u32, u32, u32, const fr*, const twiddle*,
        /// const fr*, const fr*, fr)`; a twiddle is a few doubles.
        ntt_block = "ntt_block"(
            v: out DeviceFr, tw: in f64, log_n: val u32, block_log: val u32, dif: val u32, fuse: val u32, pre_mul: in DeviceFr,
            scale_col: in f64, scale_row: in DeviceFr, sub: in DeviceFr, sub_factor: val DeviceFr,
        );
        /// `ntt_strided(fr*, const twiddle*, u32, u32, u32, u32, u32, u32, const fr*,
        /// const fr*, const fr*, u32, u32)`
        ntt_strided = "ntt_strided"(
            v: out DeviceFr, tw: in f64, log_n: val u32, s0: val u32, m: val u32, cols: val u32, dif: val u32, fuse: val u32,
            pre_mul: in DeviceFr, pow_lo: in DeviceFr, pow_hi: in DeviceFr, lo_bits: val u32, table_log: val u32,
        );
        /// `scale_by_powers(fr*, const fr*, const fr*, u32, u64)`
        scale_by_powers = "scale_by_powers"(v: out DeviceFr, lo: in DeviceFr, hi: in DeviceFr, lo_bits: val u32, n: val u64);
        /// `fill_stage_twiddles(twiddle*, const fr*, const fr*, u32, u32, u32)`
        fill_stage_twiddles = "fill_stage_twiddles"(out: out f64, lo: in DeviceFr, hi: in DeviceFr, lo_bits: val u32, log_n: val u32, table_log: val u32);
        /// `to_twiddles(twiddle*, const fr*, u64)`
        to_twiddles = "to_twiddles"(out: out f64, elems: in DeviceFr, n: val u64);
        /// `fr_binary_op(fr*, const fr*, const fr*, u32, u64)`: tests' elementwise operations.
        fr_binary_op = "fr_binary_op"(out: out DeviceFr, x: in DeviceFr, y: in DeviceFr, op: val u32, n: val u64);
        /// `fp_binary_op(fp*, const fp*, const fp*, u32, u64)`
        fp_binary_op = "fp_binary_op"(out: out DeviceFp, x: in DeviceFp, y: in DeviceFp, op: val u32, n: val u64);
        /// `msm_count(const fr*, u32, u32, u32, u32*, u32*)`
        msm_count = "msm_count"(scalars: in DeviceFr, n: val u32, c: val u32, windows: val u32, counts: out u32, digits: out u32);
        /// `msm_tile_sums(const u32*, u32, u32*)`
        msm_tile_sums = "msm_tile_sums"(counts: in u32, len: val u32, tile_sums: out u32);
        /// `msm_scan(const u32*, u32, u32*)`
        msm_scan = "msm_scan"(tile_sums: in u32, tiles: val u32, tile_offsets: out u32);
        /// `msm_tile_scan(const u32*, u32, const u32*, u32, u32*)`
        msm_tile_scan = "msm_tile_scan"(counts: in u32, len: val u32, tile_offsets: in u32, tiles: val u32, offsets: out u32);
        /// `msm_scatter(const u32*, u32, u32, u32, u32*, u32*, const u32*, u32)`
        msm_scatter = "msm_scatter"(
            digits: in u32, n: val u32, c: val u32, window: val u32, cursor: out u32, sorted: out u32, base_index: in u32, indexed: val u32,
        );
        /// `msm_split_lists(const u64*, const u64*, const u32*, const fr*, u64, const u64*
        /// (nullable), const u32*, u64, u32*, u32*, fr*)`
        msm_split_lists = "msm_split_lists"(
            one: in u64, zero: in u64, offsets: in u32, others: in DeviceFr, n: val u64, density: in u64, table: in u32,
            first_chunk: val u64, ones: out u32, index: out u32, sig: out DeviceFr,
        );
        /// `compact_word_offsets(const u64*, const u64*, u64, const u32*, u32*)`
        compact_word_offsets = "compact_word_offsets"(one: in u64, zero: in u64, n: val u64, block_first: in u32, offsets: out u32);
        /// `compact_expand(const u64*, const u64*, const u32*, const fr*, u64, fr, fr*)`
        compact_expand = "compact_expand"(
            one: in u64, zero: in u64, offsets: in u32, others: in DeviceFr, n: val u64, one_mont: val DeviceFr, out: out DeviceFr,
        );
        /// `csr_products(const u64*, u64, const u32*, const u16*, const fr*, const fr*, u64,
        /// const u64*, const u64*, const u32*, const fr*, u64, fr, u64, fr*)`
        csr_products = "csr_products"(
            row_starts: in u64, base: val u64, columns: in u32, coefficients: in u16, dictionary: in DeviceFr, lead: in DeviceFr,
            n_in: val u64, one: in u64, zero: in u64, offsets: in u32, others: in DeviceFr, n_aux: val u64, one_mont: val DeviceFr,
            n: val u64, out: out DeviceFr,
        );
    }
}
