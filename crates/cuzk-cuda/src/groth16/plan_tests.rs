//! Tests of the device-memory plan (crate::groth16::plan), for every 32 GiB circuit
//! on every card size; their shapes serve held.rs's tests too.

use super::*;

const GB: usize = 1_000_000_000;
const GIB: usize = 1 << 30;
const N: usize = 1 << 27;

/// The 32 GiB circuits (counted from the real circuits; matrices from `cuzk compile`).
pub(crate) fn porep() -> SetShape {
    SetShape {
        n: N,
        queries: [N - 1, 130_169_893, 129_753_620, 33_112_282, 33_112_282],
        inputs: 328,
        aux: 130_169_893,
        matrices_bytes: Some(7_461_000_000),
        significant: None,
    }
}
pub(crate) fn wpost() -> SetShape {
    SetShape {
        n: N,
        queries: [N - 1, 126_902_376, 96_205_645, 91_925_767, 91_925_767],
        inputs: 26_000,
        aux: 126_902_376,
        matrices_bytes: Some(9_890_000_000),
        // The booleanity bound's share at 2 KiB (99.5 %); 125.7 M measured at 9a7c8eb.
        significant: Some(126_300_000),
    }
}
pub(crate) fn snap() -> SetShape {
    let n = 1 << 27;
    SetShape {
        n,
        queries: [n - 1, 81_000_000, 80_000_000, 40_000_000, 40_000_000],
        inputs: 8,
        aux: 81_000_000,
        matrices_bytes: Some(5_000_000_000),
        significant: None,
    }
}

/// The 32 GiB WinningPoSt circuit (`cuzk compile` on the H100 at 3afd87f).
pub(crate) fn winning() -> SetShape {
    let n = 1 << 19;
    SetShape {
        n,
        queries: [n - 1, 375_210, 284_329, 272_185, 272_185],
        inputs: 133,
        aux: 375_210,
        matrices_bytes: Some(29_369_880),
        // The booleanity bound's share at 2 KiB (99.6 %).
        significant: Some(373_700),
    }
}

/// Cards by the bytes a process gets: what a cap of `gib` GiB leaves, or a whole
/// card's free memory (H100 80 GB: 84.46 GB seen free; H200: 149.55 GB).
pub(crate) fn cards() -> Vec<(&'static str, usize)> {
    vec![
        // What a 16 GiB cap left the plan on the H100 at 413e259 (the context and the
        // kernels' local memory taken first).
        ("16 GiB, 15.82 GB planned", 15_820_000_000),
        ("16 GiB", 16 * GIB),
        ("24 GiB", 24 * GIB),
        ("32 GiB", 32 * GIB),
        ("48 GiB", 48 * GIB),
        ("H100", 84_460_000_000),
        ("H200", 149_550_000_000),
    ]
}

/// Every part fits and adds up to the total; the least list piece and witness are kept.
fn check(shape: &SetShape, p: &DevicePlan) {
    assert!(p.total_bytes <= p.capacity, "{p:?}");
    let n = shape.n;
    assert!(p.slot_bytes >= 3 * 32 * n && p.slot_bytes >= 32 * n + p.lists_bytes + p.scratch_bytes + p.slot_chunk_bytes(), "{p:?}");
    assert!(p.slot_bytes % 256 == 0 && p.witness_bytes % 256 == 0, "{p:?}");
    assert!(p.lists_bytes >= LEAST_LIST_BYTES && p.witness_bytes >= shape.witness_least(), "{p:?}");
    assert!(scratch_bound::<G1>(p.h_piece) <= p.scratch_bytes && scratch_bound::<G2>(p.g2_piece) <= p.scratch_bytes, "{p:?}");
    assert!(p.g1_piece >= LIST_CHUNK && p.g2_piece >= LIST_CHUNK, "{p:?}");
    let points = p.resident_points_bytes(shape) + p.backend_chunk_bytes().map_or(0, |c| 2 * c);
    let matrices = if p.products == Products::Resident { shape.matrices_bytes.unwrap() } else { 0 };
    assert!(p.products != Products::Streamed || p.chunk_bytes().is_some(), "{p:?}");
    let parts = points + matrices + domain_bytes(27, p.table_log) + p.slots * (p.slot_bytes + p.witness_bytes) + p.msm_small_bytes + p.margin_bytes;
    assert_eq!(parts, p.total_bytes, "{p:?}");
}

#[test]
fn every_32_gib_circuit_has_a_plan_on_every_card_from_16_gib() {
    for (name, shape) in [("porep", porep()), ("wpost", wpost()), ("snap", snap())] {
        for (card, bytes) in cards() {
            let p = plan(&shape, bytes, &Held::default(), &Overrides::default()).unwrap_or_else(|e| panic!("{name} on {card}: {e}"));
            check(&shape, &p);
            eprintln!("{name} on {card}: {}", p.summary(&shape));
        }
    }
}

#[test]
fn the_h200_keeps_everything_and_the_h100_keeps_its_points_and_matrices() {
    let p = plan(&porep(), 149_550_000_000, &Held::default(), &Overrides::default()).unwrap();
    assert_eq!((p.points, p.products, p.slots, p.table_log, p.h_piece), (Placement::Resident, Products::Resident, 2, 27, N - 1));
    // The whole witness fits (a, b, c on the device), and a whole query's lists.
    assert_eq!((p.witness_bytes, p.lists_bytes), (porep().witness_worst(), porep().lists_worst()));
    // An H100: resident points, device products, one slot; a few twiddle stages
    // computed; the H MSM still in one run.
    let p = plan(&porep(), 84_460_000_000, &Held::default(), &Overrides::default()).unwrap();
    assert_eq!((p.points, p.products, p.slots, p.h_piece), (Placement::Resident, Products::Resident, 1, N - 1), "{p:?}");
    assert!((23..27).contains(&p.table_log), "{p:?}");
    // A PoRep partition's real witness (1.3 % other values) is resident.
    assert!(p.witness_bytes >= crate::msm::compact::CompactLayout::new(328, 130_169_893, 1_700_000, true).bytes());
}

#[test]
fn small_cards_stream_points_and_keep_a_b_c_on_the_device() {
    let real_witness = crate::msm::compact::CompactLayout::new(328, 130_169_893, 1_700_000, true).bytes();
    for gib in [16, 24, 32, 48] {
        let p = plan(&porep(), gib * GIB, &Held::default(), &Overrides::default()).unwrap();
        assert!(matches!(p.points, Placement::Streamed { .. }), "{gib}: {p:?}");
        // 16 GiB: a, b, c (12.9 GB) and the matrices (7.5 GB) do not fit together:
        // the matrices stream in row blocks, a, b, c are still computed there.
        assert_eq!(p.products, if gib == 16 { Products::Streamed } else { Products::Resident }, "{gib} GiB: {p:?}");
        // The real witness's other values stay resident; the H MSM runs a whole
        // chunk at a time, or all of H where its points stay on the device beside
        // the streamed others (48 GiB: 12.9 GB fewer over the bus per partition).
        assert!(p.witness_bytes >= real_witness, "{gib}: {p:?}");
        let h_resident = matches!(p.points, Placement::Streamed { h_resident: true, .. });
        assert_eq!(h_resident, gib == 48, "{gib}: {p:?}");
        // The chunk buffers sit in b and c's room after h: the lists' pieces span a
        // chunk, so they take 1.14 GB of its 8.6 GB at most. 16 GiB gets the largest
        // chunks (0.40 GB with the buffers outside the slot at 5e89282), its H MSM
        // in runs of half a chunk (a whole chunk's run buffers do not fit).
        let c = p.chunk_bytes().unwrap();
        assert!(p.chunks_in_slot, "{gib}: {p:?}");
        assert_eq!(c, crate::msm::streamed::DEFAULT_CHUNK_BYTES, "{gib}: {p:?}");
        if h_resident {
            assert_eq!(p.h_piece, N - 1, "{gib}: {p:?}");
        } else {
            assert!(p.h_piece <= c / 96 && p.h_piece >= c / 96 / 2, "{gib}: {p:?}");
        }
        assert!(p.lists_bytes <= (c / 96) * 68 + 4096, "{gib}: {p:?}");
    }
    // Told to keep the chunk buffers the backend's: the 16 GiB plan of 5e89282.
    let outside = Overrides { chunks_outside_slot: true, ..Overrides::default() };
    let p = plan(&porep(), 15_820_000_000, &Held::default(), &outside).unwrap();
    assert!(!p.chunks_in_slot && p.products == Products::Streamed, "{p:?}");
    assert_eq!((p.chunk_bytes(), p.backend_chunk_bytes()), (Some(402_653_184), Some(402_653_184)), "{p:?}");
    // Told to: a, b, c on the host, or the matrices streamed where they would fit.
    let host = Overrides { host_products: true, ..Overrides::default() };
    assert_eq!(plan(&porep(), 16 * GIB, &Held::default(), &host).unwrap().products, Products::Host);
    let streamed = Overrides { stream_matrices: true, ..Overrides::default() };
    let p = plan(&porep(), 149_550_000_000, &Held::default(), &streamed).unwrap();
    assert!(p.products == Products::Streamed && p.chunk_bytes().is_some(), "{p:?}");
    assert!(Overrides { stream_matrices: true, host_products: true, ..Overrides::default() }.check().is_err());
}

#[test]
fn more_memory_never_gives_a_worse_placement() {
    let (mut resident, mut device, mut slots, mut matrices_resident) = (false, false, 0, false);
    for gb in (17..=160).map(|g| g * GB) {
        let p = plan(&porep(), gb, &Held::default(), &Overrides::default()).unwrap();
        check(&porep(), &p);
        let r = p.points == Placement::Resident;
        assert!(r || !resident, "{gb}: streamed after resident");
        assert!(p.products.on_device() || !device, "{gb}: host products after device ones");
        let m = p.products == Products::Resident;
        assert!(m || !matrices_resident, "{gb}: matrices streamed after resident");
        matrices_resident = m;
        assert!(p.slots >= slots || !r, "{gb}: fewer slots with more memory");
        (resident, device) = (r, p.products.on_device());
        if r {
            slots = p.slots;
        }
    }
    assert!(resident && device && slots == 2);
}

/// A WindowPoSt partition's witness is nearly all significant values: where a, b, c
/// are computed on the device the area holds them all (else they were computed on
/// the host), and where that does not fit the plan says a, b, c are on the host.
#[test]
fn a_witness_of_field_elements_gets_its_whole_area_where_a_b_c_are_on_the_device() {
    let real = crate::msm::compact::CompactLayout::new(26_000, 126_902_376, 125_700_000, true).bytes();
    for (card, bytes) in cards() {
        let p = plan(&wpost(), bytes, &Held::default(), &Overrides::default()).unwrap_or_else(|e| panic!("{card}: {e}"));
        check(&wpost(), &p);
        assert!(!p.products.on_device() || p.witness_bytes >= real, "{card}: {}", p.summary(&wpost()));
        eprintln!("wpost on {card}: {}", p.summary(&wpost()));
    }
    // The whole H100 computes them on the device (at 9a7c8eb it had 1.09 GB of area,
    // and a, b, c went to the host); so does every card from 32 GiB.
    for bytes in [32 * GIB, 48 * GIB, 84_460_000_000, 149_550_000_000] {
        assert!(plan(&wpost(), bytes, &Held::default(), &Overrides::default()).unwrap().products.on_device(), "{bytes}");
    }
    // Unknown, the plan keeps its default: a twentieth.
    let unknown = SetShape { significant: None, ..wpost() };
    let p = plan(&unknown, 84_460_000_000, &Held::default(), &Overrides::default()).unwrap();
    assert!(p.witness_bytes < real, "{p:?}");
}

#[test]
fn too_little_memory_is_refused_with_the_least_needed() {
    let e = plan(&porep(), 8 * GIB, &Held::default(), &Overrides::default()).unwrap_err();
    assert!(e.contains("8.59 GB available") && e.contains("at least"), "{e}");
    // a, b, c alone are 12.9 GB at 2^27.
    let least: f64 = e.split("at least ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(least > 12.9, "{e}");
    assert!(plan(&porep(), ((least + 0.01) * 1e9) as usize, &Held::default(), &Overrides::default()).is_ok(), "{e}");
}

#[test]
fn other_sets_are_counted_and_the_shared_parts_kept_at_their_largest() {
    let first = plan(&porep(), 149_550_000_000, &Held::default(), &Overrides::default()).unwrap();
    let held = Held::of([(&first, &porep())]);
    assert_eq!(held.other_sets, porep().points_bytes() + porep().matrices_bytes.unwrap());
    // WindowPoSt beside a resident PoRep set on an H200: its points do not fit too.
    let p = plan(&wpost(), 149_550_000_000, &held, &Overrides::default()).unwrap();
    assert!(p.total_bytes <= 149_550_000_000 && p.total_bytes > held.other_sets, "{p:?}");
    assert!(matches!(p.points, Placement::Streamed { .. }), "{p:?}");
    assert!(p.slot_bytes >= first.slot_bytes && p.witness_bytes >= first.witness_bytes && p.slots <= first.slots);
}

#[test]
fn piece_limits_follow_the_plan() {
    let p = plan(&porep(), 16 * GIB, &Held::default(), &Overrides::default()).unwrap();
    let c = p.chunk_bytes().unwrap();
    let l = p.piece_limits(false, false);
    assert_eq!((l.bytes, l.significant, l.bases, l.window), (p.lists_bytes, p.g1_piece, c / 96, false));
    let b = p.piece_limits(true, true);
    assert_eq!((b.bases, b.significant, b.window), (c / 192, p.g2_piece.min(p.g1_piece), true));
    let r = plan(&porep(), 149_550_000_000, &Held::default(), &Overrides::default()).unwrap();
    assert_eq!(r.piece_limits(false, false).bases, usize::MAX);
}

/// A deadline's set is never refused for the PoRep set a host keeps loaded: WindowPoSt,
/// WinningPoSt and SnapDeals each have a plan beside a PoRep set planned first, at a
/// 16 GiB cap, on the H100 and on the H200 (the cards between were seen to plan too, at
/// 3 s a plan in a test build). Beside it on the H100 the WindowPoSt plan degrades (every
/// point streamed, a, b, c on the host) and WinningPoSt's points stream (0.13 GB left).
#[test]
fn the_other_sets_plan_beside_a_porep_set_planned_first() {
    for (card, bytes) in cards().into_iter().filter(|(c, _)| c.starts_with("16 GiB,") || c.starts_with('H')) {
        let first = plan(&porep(), bytes, &Held::default(), &Overrides::default()).unwrap();
        let held = Held::of([(&first, &porep())]);
        for (name, shape) in [("wpost", wpost()), ("winning", winning()), ("snap", snap())] {
            let p = plan(&shape, bytes, &held, &Overrides::default()).unwrap_or_else(|e| panic!("{name} beside porep on {card}: {e}"));
            assert!(p.total_bytes <= bytes && p.total_bytes >= held.other_sets, "{name} on {card}: {p:?}");
            eprintln!("{name} beside porep on {card}: {}", p.summary(&shape));
        }
    }
}
