//! `cuzk circuits`: every Filecoin circuit's shape, counted from its blank circuit (no
//! witness, little memory): constraints, variables, the query lengths and the size of
//! its parameter file. The big ones take about a minute each on one core.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_filecoin::{setup, Circuit, CircuitKind, SectorSize};
use cuzk_groth16::shape::CircuitShape;
use rayon::prelude::*;

#[derive(Args, Debug)]
pub struct CircuitsArgs {
    /// Circuit ids (porep-32g, wpost-2k, …), comma-separated; default: all twenty.
    #[arg(long, value_delimiter = ',')]
    pub ids: Vec<String>,
    /// Also write the counts here, one JSON object per line, for `cuzk setup
    /// --timing-params --shapes FILE` (a count of a big circuit takes minutes).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// One line of `cuzk circuits --json`.
#[derive(serde::Serialize, serde::Deserialize)]
struct ShapeLine {
    circuit: String,
    inputs: usize,
    aux: usize,
    constraints: usize,
    a_aux: usize,
    b_inputs: usize,
    b_aux: usize,
}

/// `circuit`'s shape from a `cuzk circuits --json` file.
pub fn shape_from_file(path: &std::path::Path, circuit: Circuit) -> Result<CircuitShape> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let l: ShapeLine =
            serde_json::from_str(line).with_context(|| format!("{} line {}: not a `cuzk circuits --json` line", path.display(), i + 1))?;
        if l.circuit == circuit.id() {
            return Ok(CircuitShape {
                inputs: l.inputs,
                aux: l.aux,
                constraints: l.constraints,
                a_aux: l.a_aux,
                b_inputs: l.b_inputs,
                b_aux: l.b_aux,
            });
        }
    }
    anyhow::bail!("{} has no counts of {circuit} (cuzk circuits --ids {circuit} --json FILE makes them)", path.display())
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
    // One circuit per thread; printed in order once all are counted.
    let rows: Vec<Result<(String, String)>> = circuits
        .par_iter()
        .map(|&c| {
            let t = Instant::now();
            let s = setup::blank_shape(c).with_context(|| format!("counting {c}"))?;
            let q = s.query_lens();
            let json = serde_json::to_string(&ShapeLine {
                circuit: c.id(),
                inputs: s.inputs,
                aux: s.aux,
                constraints: s.constraints,
                a_aux: s.a_aux,
                b_inputs: s.b_inputs,
                b_aux: s.b_aux,
            })?;
            let row = format!(
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
            );
            Ok((row, json))
        })
        .collect();
    let mut lines = String::new();
    for r in rows {
        let (row, json) = r?;
        println!("{row}");
        lines += &json;
        lines.push('\n');
    }
    if let Some(path) = &args.json {
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
        println!("counts written to {}", path.display());
    }
    Ok(())
}
