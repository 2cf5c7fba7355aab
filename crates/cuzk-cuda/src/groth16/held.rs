//! What the parameter sets loaded on one GPU hold together, which a new set's plan
//! (crate::groth16::plan) must fit beside: each set's resident parts (points, compiled
//! matrices) add up; the parts every set shares (staging slots, chunk buffers, the
//! MSMs' small buffers, the NTT tables' budget) are as large as the largest plan made
//! them; one margin. [`Held::need`] is what the device holds with all of them loaded,
//! which never passes the memory the last plan had (tested for every card and order).

use super::plan::{DevicePlan, SetShape, MARGIN_BYTES};
use crate::ntt::{domain_bytes, table_log_within, twiddle_table_bytes};

/// What a backend's loaded sets hold, shared or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Resident points and device matrices of the loaded sets.
    pub other_sets: usize,
    /// The shared parts as the sets' plans size them: the fewest slots, the largest
    /// slot and witness area, chunk buffers and MSM buffers.
    pub slots: usize,
    pub slot_bytes: usize,
    pub witness_bytes: usize,
    pub chunk_bytes: usize,
    pub small_bytes: usize,
    /// The NTT's twiddle-table budget (the largest plan's tables), which every domain
    /// keeps its tables within (crate::ntt::table_log_within).
    pub table_budget: usize,
    /// The loaded sets' domains (log2), each with tables of its own.
    pub domains: Vec<u32>,
}

impl Held {
    /// What `sets` (each a plan with its set's shape) hold together.
    pub fn of<'a>(sets: impl IntoIterator<Item = (&'a DevicePlan, &'a SetShape)>) -> Held {
        let mut held = Held::default();
        for (p, shape) in sets {
            held.other_sets += p.resident_points_bytes(shape) + p.device_matrices_bytes(shape);
            held.slots = if held.slots == 0 { p.slots } else { held.slots.min(p.slots) };
            held.slot_bytes = held.slot_bytes.max(p.slot_bytes);
            held.witness_bytes = held.witness_bytes.max(p.witness_bytes);
            held.chunk_bytes = held.chunk_bytes.max(p.backend_chunk_bytes().unwrap_or(0));
            held.small_bytes = held.small_bytes.max(p.msm_small_bytes);
            held.table_budget = held.table_budget.max(twiddle_table_bytes(p.table_log));
            let log_n = shape.n.max(1).trailing_zeros();
            if !held.domains.contains(&log_n) {
                held.domains.push(log_n);
            }
        }
        held
    }

    /// The NTT tables of every domain held and of `log_n`, with a new plan's tables up
    /// to stage `table_log`: the budget then, and the bytes of all the tables kept.
    pub fn tables_with(&self, log_n: u32, table_log: u32) -> (usize, usize) {
        let budget = self.table_budget.max(twiddle_table_bytes(table_log));
        let mut domains = self.domains.clone();
        if !domains.contains(&log_n) {
            domains.push(log_n);
        }
        (budget, domains.iter().map(|&d| domain_bytes(d, table_log_within(d, budget))).sum())
    }

    /// Device bytes of everything held: what the device holds with these sets loaded.
    pub fn need(&self) -> usize {
        let tables: usize = self.domains.iter().map(|&d| domain_bytes(d, table_log_within(d, self.table_budget))).sum();
        self.other_sets + tables + 2 * self.chunk_bytes + self.slots * (self.slot_bytes + self.witness_bytes) + self.small_bytes + MARGIN_BYTES
    }

    /// One line for the log: what the loaded sets hold, before a new set is planned.
    pub fn summary(&self, capacity: usize) -> String {
        let gb = |b: usize| format!("{:.2}", b as f64 / 1e9);
        if self.domains.is_empty() {
            return format!("no set loaded; the plan may use {} GB", gb(capacity));
        }
        let (_, tables) = self.tables_with(self.domains[0], 0);
        format!(
            "the loaded sets hold {} GB resident (points, matrices) and share {} slot(s) of {} GB + witness {} GB, chunk buffers 2 × {} GB, NTT tables {} GB, MSM buffers {} GB: {} of the {} GB a plan may use",
            gb(self.other_sets),
            self.slots,
            gb(self.slot_bytes),
            gb(self.witness_bytes),
            gb(self.chunk_bytes),
            gb(tables),
            gb(self.small_bytes),
            gb(self.need()),
            gb(capacity)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::tests::{cards, porep, snap, winning, wpost};
    use super::super::plan::{plan, Overrides};
    use super::*;

    /// Sets loaded one after another in every order: each planned beside the ones
    /// before (or refused), and all of them together never hold more than the card.
    #[test]
    fn the_sets_loaded_on_a_device_never_add_up_past_its_memory() {
        let sets = [("porep", porep()), ("wpost", wpost()), ("snap", snap()), ("winning", winning())];
        let orders: Vec<Vec<usize>> = vec![vec![3, 0], vec![0, 3], vec![0, 3, 1], vec![3, 1, 0], vec![2, 3], vec![0, 1, 2, 3], vec![3, 2, 1, 0]];
        for (card, capacity) in cards() {
            for order in &orders {
                let mut loaded: Vec<(DevicePlan, SetShape)> = Vec::new();
                let mut names = Vec::new();
                for &i in order {
                    let (name, shape) = &sets[i];
                    let held = Held::of(loaded.iter().map(|(p, s)| (p, s)));
                    match plan(shape, capacity, &held, &Overrides::default()) {
                        Ok(p) => {
                            assert!(p.total_bytes <= capacity, "{name} on {card}: {p:?}");
                            loaded.push((p, shape.clone()));
                            names.push(*name);
                            let all = Held::of(loaded.iter().map(|(p, s)| (p, s)));
                            assert!(all.need() <= capacity, "{names:?} on {card}: {} > {capacity}: {all:?}", all.need());
                            assert_eq!(all.need(), loaded.last().map_or(0, |(p, _)| p.total_bytes), "{names:?} on {card}: the last plan counts all");
                        }
                        Err(e) => assert!(!loaded.is_empty(), "{name} alone on {card}: {e}"),
                    }
                }
            }
        }
    }

    /// A small set loaded beside a large one keeps the large one's NTT tables (it
    /// used to shrink the budget to its own, leaving a 2^27 domain to compute most of
    /// its twiddles), and fits on every card whichever comes first, beside every
    /// large set.
    #[test]
    fn a_small_set_beside_a_large_one_keeps_its_tables_and_fits() {
        // The H100's whole card as the backend planned it at e2b69a2 (83.48 GB).
        let capacities = cards().into_iter().map(|(_, c)| c).chain([83_480_000_000]);
        let pairs =
            capacities.flat_map(|c| [[0, 1], [1, 0]].map(|o| (c, o))).flat_map(|(c, o)| [porep(), wpost(), snap()].map(move |big| (c, o, big)));
        for (capacity, order, big) in pairs {
            let shapes = [big, winning()];
            let mut loaded: Vec<(DevicePlan, SetShape)> = Vec::new();
            for i in order {
                let held = Held::of(loaded.iter().map(|(p, s)| (p, s)));
                let p = plan(&shapes[i], capacity, &held, &Overrides::default()).unwrap_or_else(|e| panic!("{order:?} at {capacity}: {e}"));
                loaded.push((p, shapes[i].clone()));
            }
            let all = Held::of(loaded.iter().map(|(p, s)| (p, s)));
            let large_tables = loaded.iter().find(|(_, s)| s.n == 1 << 27).map(|(p, _)| p.table_log).unwrap();
            assert_eq!(table_log_within(27, all.table_budget), large_tables, "{order:?}: {all:?}");
            assert!(all.need() <= capacity, "{order:?} at {capacity}");
        }
    }
}
