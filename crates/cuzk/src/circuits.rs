//! `cuzk circuits`: every Filecoin circuit's shape, counted from its blank circuit (no
//! witness, little memory): constraints, variables, the query lengths and the size of
//! its parameter file. The big ones take about a minute each on one core.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_filecoin::{setup, Circuit, CircuitKind, SectorSize};
use rayon::prelude::*;

#[derive(Args, Debug)]
pub struct CircuitsArgs {
    /// Circuit ids (porep-32g, wpost-2k, …), comma-separated; default: all twenty.
    #[arg(long, value_delimiter = ',')]
    pub ids: Vec<String>,
}

pub fn parse_circuit(id: &str) -> Result<Circuit> {
    Circuit::from_id(id).with_context(|| format!("{id:?} is not a Filecoin circuit id (porep-, snap-, wpost-, winning- and 2k, 8m, 512m, 32g, 64g)"))
}

pub fn run(args: &CircuitsArgs) -> Result<()> {
    let circuits: Vec<Circuit> = if args.ids.is_empty() {
        CircuitKind::ALL.into_iter().flat_map(|kind| SectorSize::ALL.into_iter().map(move |size| Circuit { kind, size })).collect()
    } else {
        args.ids.iter().map(|id| parse_circuit(id)).collect::<Result<_>>()?
    };
    println!(
        "{:<14} {:>12} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>16}  counted",
        "circuit", "constraints", "inputs", "aux", "h", "l", "a", "b", "params bytes"
    );
    // One circuit per thread, printed in order as they finish.
    let rows: Vec<Result<String>> = circuits
        .par_iter()
        .map(|&c| {
            let t = Instant::now();
            let s = setup::blank_shape(c).with_context(|| format!("counting {c}"))?;
            let q = s.query_lens();
            Ok(format!(
                "{:<14} {:>12} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>16}  {:.1} s",
                c.id(),
                s.constraints,
                s.inputs,
                s.aux,
                q.h,
                q.l,
                q.a,
                q.b_g1,
                s.params_file_bytes(),
                t.elapsed().as_secs_f64()
            ))
        })
        .collect();
    for r in rows {
        println!("{}", r?);
    }
    Ok(())
}
