//! The folders of `net/src` are floors, and a module imports only from its own floor and the
//! floors below it (the order is [`FLOORS`], top first). This reads every source file and
//! names each import that points up.

use std::path::{Path, PathBuf};

/// Top floor first.
const FLOORS: &[&str] = &[
    "runtime",
    "handlers",
    "topics",
    "shard",
    "transactions",
    "groups",
    "peers",
    "model",
    "protocol",
];

fn floor_of(name: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| *floor == name)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every floor named after `crate::` in `text`, including inside `crate::{a::.., b::..}`.
fn floors_named(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|item| item.trim().split("::").next().unwrap_or(""))
                .collect()
        } else {
            vec![rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")]
        };
        for name in names {
            if let Some(floor) = floor_of(name) {
                let line = text[..at].lines().count().max(1);
                found.push((floor, format!("line {line}: crate::{name}")));
            }
        }
    }
    found
}

#[test]
fn no_module_imports_a_floor_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut against = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("");
        let Some(own) = floor_of(top) else {
            // lib.rs only: it declares the floors.
            assert_eq!(relative, Path::new("lib.rs"), "a file outside every floor");
            continue;
        };
        checked += 1;
        let text = std::fs::read_to_string(file).expect("readable source");
        for (floor, place) in floors_named(&text) {
            if floor < own {
                against.push(format!(
                    "{} ({}) imports {} ({place})",
                    relative.display(),
                    FLOORS[own],
                    FLOORS[floor]
                ));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} files found under {}",
        src.display()
    );
    assert!(
        against.is_empty(),
        "imports against the floors:\n{}",
        against.join("\n")
    );
}

#[test]
fn the_scan_sees_grouped_and_plain_imports() {
    let names =
        floors_named("use crate::{shard::Shard, model::x};\nfn f() { crate::runtime::y() }");
    let floors: Vec<&str> = names.iter().map(|(f, _)| FLOORS[*f]).collect();
    assert_eq!(floors, ["shard", "model", "runtime"]);
}
