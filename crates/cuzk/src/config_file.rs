//! The daemon's configuration file, read the same way by `cuzk daemon`, its
//! `--check-config` and `cuzk params check --config`.

use std::path::Path;

use anyhow::{Context, Result};
use cuzk_server::config::{parameter_dir_from_env, state_dir_from_env, DaemonConfig};

/// Reads a configuration file (the defaults without one); srs.param_cache defaults to
/// $FIL_PROOFS_PARAMETER_CACHE and daemon.state_dir to $STATE_DIRECTORY (systemd's
/// `StateDirectory=`) when the file names none; relative paths in the file are taken
/// from the file's folder. Returns the warnings to log.
pub fn read_config(path: Option<&Path>) -> Result<(DaemonConfig, Vec<String>)> {
    let mut base = DaemonConfig::defaults_with(parameter_dir_from_env());
    base.state_dir = state_dir_from_env();
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let state_from_env = base.state_dir.clone();
            let (mut config, warnings) = DaemonConfig::from_toml_over(&text, base).with_context(|| format!("in {}", path.display()))?;
            // The file's relative paths, from its own folder.
            let folder = std::path::absolute(path).with_context(|| format!("locating {}", path.display()))?;
            let folder = folder.parent().unwrap_or(Path::new("/"));
            let env_state = (config.state_dir == state_from_env).then(|| config.state_dir.take()).flatten();
            config.anchor_paths(folder);
            if env_state.is_some() {
                config.state_dir = env_state;
            }
            Ok((config, warnings))
        }
        None => Ok((base, Vec::new())),
    }
}
