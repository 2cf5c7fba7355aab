//! `cuzk compile`: records Filecoin circuits' constraint matrices ahead of time, beside
//! the parameter files (`<stem>.cuzk-matrices`), so that no proof waits for it. Prints
//! what each circuit compiles to: constraints, non-zeros, distinct coefficients, bytes
//! per non-zero and the file's size.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_filecoin::matrices::{compile_to, identity, matrices_path};
use cuzk_groth16::matrix_file::read_matrices;
use cuzk_server::config::{parameter_dir_from_env, DaemonConfig};

use crate::circuits::parse_circuit;
use crate::progress::Bars;

#[derive(Args, Debug)]
pub struct CompileArgs {
    /// Circuit ids (porep-32g, snap-32g, wpost-32g, …), comma-separated.
    #[arg(long = "circuit", value_delimiter = ',', required = true)]
    circuits: Vec<String>,
    /// Where the files go: the parameter directory. Default: $FIL_PROOFS_PARAMETER_CACHE,
    /// else /data/zk/params (the daemon's own default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Compile again even when a usable file exists.
    #[arg(long)]
    force: bool,
}

pub fn run(args: &CompileArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| DaemonConfig::defaults_with(parameter_dir_from_env()).parameter_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let circuits = args.circuits.iter().map(|id| parse_circuit(id)).collect::<Result<Vec<_>>>()?;
    for circuit in circuits {
        let path = matrices_path(circuit, &dir)?;
        if !args.force {
            match read_matrices(&path, &identity(circuit)?) {
                Ok(m) => {
                    println!("{circuit}: up to date, {} ({} constraints, {} non-zeros)", path.display(), m.num_constraints(), m.non_zeros());
                    continue;
                }
                Err(e) if e.needs_recompile() => println!("{circuit}: {e}; compiling again"),
                Err(_) => {}
            }
        }
        let started = Instant::now();
        let bars = Bars::new();
        let (path, m) = compile_to(circuit, &dir, &bars).with_context(|| format!("compiling {circuit}"))?;
        bars.finish();
        let file_bytes = std::fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?.len();
        println!(
            "{circuit}: {} constraints, {} inputs, {} aux; non-zeros A {} B {} C {} ({} in all); {} distinct coefficients; file {:.2} GiB, {:.2} bytes per non-zero; {:.1} s -> {}",
            m.num_constraints(),
            m.num_inputs,
            m.num_aux,
            m.a.non_zeros(),
            m.b.non_zeros(),
            m.c.non_zeros(),
            m.non_zeros(),
            m.dictionary.len(),
            file_bytes as f64 / (1u64 << 30) as f64,
            file_bytes as f64 / m.non_zeros() as f64,
            started.elapsed().as_secs_f64(),
            path.display()
        );
    }
    Ok(())
}
