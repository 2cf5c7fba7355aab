//! No module of any crate in the workspace depends on itself through others: the
//! layering ARCHITECTURE.md draws holds inside every crate, not only between them
//! (cargo already refuses cycles between crates).
//!
//! Each source file is a module; an edge runs from a module to every module a
//! `crate::`, `super::` or `self::` path (or one starting at a child module's name) in
//! its non-test code reaches, through `pub use` re-exports to the module that defines
//! the item. A re-export itself is no edge: a facade (lib.rs, a mod.rs) may name its
//! children's items, but its own code may not use a module that uses it. Comments
//! are ignored, and so is code after `#[cfg(test)]` (tests sit at the end of a file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn workspace_crates() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.join("lib.rs").exists() || p.join("main.rs").exists())
        .collect();
    out.sort();
    out
}

/// Every .rs file under `dir` with its module path (lib.rs, main.rs: the root).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().map_or(true, |x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let mut m: Module = rel.iter().map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                m.pop();
            }
            // A binary's other roots (src/bin/*) are not modules of the library.
            if m.first().is_some_and(|s| s == "bin") {
                continue;
            }
            out.insert(m, p);
        }
    }
    out
}

/// The code of a file without comments and without its trailing test module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        // Comments (and, harmlessly, the rest of a string holding "//").
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Expands a `use` tree (without `use` and `;`) into full paths, each a list of segments.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    // Renames (`X as Y`) name the same item: drop ` as Y`.
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut kept = String::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "as" && i + 1 < words.len() {
            // The new name, up to a separator that may follow it.
            let rename = words[i + 1];
            kept.push_str(&rename[rename.find(|c: char| !is_ident(c)).unwrap_or(rename.len())..]);
            i += 2;
        } else {
            kept.push_str(words[i]);
            i += 1;
        }
    }
    let tree = kept;
    let mut out = Vec::new();
    expand_into(&tree, Vec::new(), &mut out);
    out
}

fn expand_into(tree: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    // Split at top-level commas.
    let (mut depth, mut start) = (0, 0);
    let mut parts = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        match part.find('{') {
            Some(b) => {
                let head = part[..b].trim_end_matches("::");
                let mut p = prefix.clone();
                p.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
                expand_into(&part[b + 1..part.len() - 1], p, out);
            }
            None => {
                let mut p = prefix.clone();
                p.extend(part.split("::").map(String::from));
                out.push(p);
            }
        }
    }
}

/// The paths a module's code names: every `use` tree, and every path in expressions
/// and types (with the `pub use` trees apart: the re-exports).
fn paths(code: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let (mut uses, mut reexports, mut rest) = (Vec::new(), Vec::new(), String::new());
    let mut text = code;
    while let Some(i) = text.find("use ") {
        let before = &text[..i];
        let word_start = before.chars().last().map_or(true, |c| !is_ident(c));
        let Some(end) = text[i..].find(';') else { break };
        rest.push_str(before);
        if word_start {
            let line_start = before.rfind('\n').map_or(0, |n| n + 1);
            let public = before[line_start..].trim_start().starts_with("pub");
            let trees = expand_use(&text[i + 4..i + end]);
            // A re-export is a name, not a use: the edges run from its users to the
            // module that defines the item (see `target`).
            if public {
                reexports.extend(trees);
            } else {
                uses.extend(trees);
            }
        } else {
            rest.push_str(&text[i..i + end]);
        }
        text = &text[i + end + 1..];
    }
    rest.push_str(text);
    // Inline paths.
    let bytes: Vec<char> = rest.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if (i == 0 || !is_ident(bytes[i - 1])) && bytes[i].is_alphabetic() {
            let mut j = i;
            let mut segs = Vec::new();
            loop {
                let s = j;
                while j < bytes.len() && is_ident(bytes[j]) {
                    j += 1;
                }
                segs.push(bytes[s..j].iter().collect::<String>());
                if j + 2 < bytes.len() && bytes[j] == ':' && bytes[j + 1] == ':' && is_ident(bytes[j + 2]) {
                    j += 2;
                } else {
                    break;
                }
            }
            // Another crate's paths and types' associated items resolve to nothing
            // (see `absolute`): only this crate's modules make edges.
            if segs.len() > 1 {
                uses.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    (uses, reexports)
}

/// `path` as named in module `m`: absolute, or None for another crate's.
fn absolute(m: &Module, path: &[String], mods: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut cur = m.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            cur.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                cur.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module named without `self::` (uniform paths).
            let mut child = cur.clone();
            child.push(first.to_string());
            if !mods.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    cur.extend(rest.iter().cloned());
    Some(cur)
}

/// The module that defines what absolute path `p` names, following re-exports.
fn target(p: &Module, mods: &BTreeMap<Module, PathBuf>, reexports: &BTreeMap<Module, BTreeMap<String, Module>>, depth: usize) -> Module {
    let mut k = p.len();
    while k > 0 && !mods.contains_key(&p[..k]) {
        k -= 1;
    }
    let module = p[..k].to_vec();
    if depth < 8 {
        if let Some(item) = p.get(k) {
            if let Some(src) = reexports.get(&module).and_then(|r| r.get(item)) {
                let mut full = src.clone();
                full.extend(p[k + 1..].iter().cloned());
                return target(&full, mods, reexports, depth + 1);
            }
        }
    }
    module
}

fn cycle(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    // 0 unvisited, 1 on the stack, 2 done.
    fn visit(m: &Module, g: &BTreeMap<Module, BTreeSet<Module>>, state: &mut BTreeMap<Module, u8>, stack: &mut Vec<Module>) -> Option<Vec<Module>> {
        state.insert(m.clone(), 1);
        stack.push(m.clone());
        for n in g.get(m).into_iter().flatten() {
            match state.get(n).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == n).unwrap_or(0);
                    let mut c = stack[from..].to_vec();
                    c.push(n.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(n, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The module graph of the crate whose sources are in `src`.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mods = modules(src);
    let mut named = BTreeMap::new();
    let mut reexports: BTreeMap<Module, BTreeMap<String, Module>> = BTreeMap::new();
    for (m, path) in &mods {
        let (uses, public) = paths(&code(path));
        for p in public {
            if let (Some(abs), Some(name)) = (absolute(m, &p, &mods), p.last()) {
                if name != "*" && name != "self" {
                    reexports.entry(m.clone()).or_default().insert(name.clone(), abs);
                }
            }
        }
        named.insert(m.clone(), uses);
    }
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, uses) in named {
        let edges = g.entry(m.clone()).or_default();
        for p in uses {
            let Some(abs) = absolute(&m, &p, &mods) else { continue };
            let abs: Module = abs.into_iter().filter(|s| s != "*").collect();
            let t = target(&abs, &mods, &reexports, 0);
            if t != m {
                edges.insert(t);
            }
        }
    }
    g
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = workspace_crates();
    assert!(crates.len() >= 6, "found only {crates:?}");
    let mut found = Vec::new();
    for src in &crates {
        if let Some(c) = cycle(&graph(src)) {
            found.push(format!("{}: {}", src.display(), c.iter().map(show).collect::<Vec<_>>().join(" → ")));
        }
    }
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// The check itself finds a cycle where there is one, through a re-export too.
#[test]
fn a_cycle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use b::Thing;\n").unwrap();
    std::fs::write(src.join("a.rs"), "// crate::b::c is only a comment\nuse crate::Thing;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod c;\npub use c::Thing;\n").unwrap();
    std::fs::write(src.join("b/c.rs"), "pub struct Thing(crate::a::A);\n#[cfg(test)]\nmod tests { use crate::b::*; }\n").unwrap();
    let c = cycle(&graph(src)).expect("a → b::c → a is a cycle");
    assert!(c.contains(&vec!["a".to_string()]) && c.contains(&vec!["b".to_string(), "c".to_string()]), "{c:?}");
    // Without the back edge: none.
    std::fs::write(src.join("b/c.rs"), "pub struct Thing;\n").unwrap();
    assert_eq!(cycle(&graph(src)), None);
    // A facade's own code using a child that uses the facade: a cycle; its re-exports
    // alone are not.
    std::fs::write(src.join("b/mod.rs"), "mod c;\npub use c::Thing;\npub fn helper() {}\n").unwrap();
    std::fs::write(src.join("b/c.rs"), "pub struct Thing;\nfn f() { super::helper() }\n").unwrap();
    assert_eq!(cycle(&graph(src)), None, "re-exports are no edges");
    std::fs::write(src.join("b/mod.rs"), "mod c;\npub use c::Thing;\npub fn helper() { c::made() }\n").unwrap();
    std::fs::write(src.join("b/c.rs"), "pub struct Thing;\npub fn made() { super::helper() }\n").unwrap();
    assert!(cycle(&graph(src)).is_some(), "b → b::c → b is a cycle");
}
