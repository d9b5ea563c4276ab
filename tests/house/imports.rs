// The shape of the workspace as its imports draw it, checked without a broker:
//
// (d) inside each crate, module imports point one way: no module reaches, through paths it
//     writes as `crate::...` or `super::...`, a module that reaches it back (a module is a file;
//     `mod.rs` is its directory's module; code under `#[cfg(test)]` does not count);
// (e) the crates depend on each other as ARCHITECTURE.md's crate table says (the compiler then
//     holds every layer: a crate cannot name one it does not depend on), and inside
//     `ringmq-protocol` the helpers below everything (`common`, `constants`) reach nothing else.
//
// A module's uses of its own children by relative path (`mod x; ... x::f()`) are containment,
// not imports, and are not drawn. Every failure names the modules and the edges of the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's library crates: `crates/<dir>`, by directory name.
fn crate_dirs() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(workspace_root().join("crates"))
        .expect("read crates/")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// Every `.rs` file of one crate's library (not `main.rs`, not `bin/`) with its module path.
fn modules(src_root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src_root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src_root).expect("under src");
            let mut parts: Module = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            match parts.last().map(String::as_str) {
                Some("main") if parts.len() == 1 => continue,
                Some("lib") if parts.len() == 1 => parts.clear(),
                Some("mod") => {
                    parts.pop();
                }
                _ => {}
            }
            out.insert(parts, path);
        }
    }
    out
}

/// The source without comments and without `#[cfg(test)]` items (a `mod tests { ... }` block
/// or a `mod x;` declaration).
fn code_of(src: &str) -> String {
    let no_comments: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = no_comments.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        rest = &rest[i + "#[cfg(test)]".len()..];
        // Skip the item: up to its `;` or its balanced `{ ... }`.
        let semi = rest.find(';');
        let brace = rest.find('{');
        match (semi, brace) {
            (Some(s), Some(b)) if s < b => rest = &rest[s + 1..],
            (Some(s), None) => rest = &rest[s + 1..],
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = rest.len();
                for (j, c) in rest[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &rest[end..];
            }
            (None, None) => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// Modules declared `#[cfg(test)] mod x;` (their files are test code).
fn test_only_children(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("#[cfg(test)]") {
        rest = &rest[i + "#[cfg(test)]".len()..];
        let item = rest.trim_start();
        let item = item.strip_prefix("pub ").unwrap_or(item);
        if let Some(decl) = item.strip_prefix("mod ") {
            let name: String = decl
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if decl[name.len()..].trim_start().starts_with(';') {
                out.push(name);
            }
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// The module paths a file's code names: `crate::a::b::Item`, `super::x`, and each path of a
/// `crate::a::{b, c::d}` group (one level of braces).
fn named_paths(code: &str, here: &Module) -> Vec<Module> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Module = if start == "crate::" {
                Vec::new()
            } else {
                let mut b = here.clone();
                b.pop();
                b
            };
            let mut rest = &code[at + start.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            loop {
                let id = ident_at(rest);
                if id.is_empty() {
                    break;
                }
                base.push(id.to_string());
                match rest[id.len()..].strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            if let Some(group) = rest.strip_prefix('{') {
                group_paths(group, &base, &mut out);
            }
            out.push(base);
        }
    }
    out
}

/// The paths of a `{ ... }` use group (its opening brace already taken), nested groups
/// included, each under `base`.
fn group_paths(group: &str, base: &Module, out: &mut Vec<Module>) {
    let mut depth = 0usize;
    let mut item_start = 0;
    let mut items = Vec::new();
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[item_start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[item_start..i]);
                item_start = i + 1;
            }
            _ => {}
        }
    }
    for item in items {
        let mut p = base.clone();
        let mut rest = item.trim();
        loop {
            let id = ident_at(rest);
            if id.is_empty() {
                break;
            }
            if id != "self" {
                p.push(id.to_string());
            }
            match rest[id.len()..].strip_prefix("::") {
                Some(r) => rest = r,
                None => {
                    rest = "";
                    break;
                }
            }
        }
        match rest.strip_prefix('{') {
            Some(inner) => group_paths(inner, &p, out),
            None => out.push(p),
        }
    }
}

/// The longest prefix of `path` that is a module file.
fn resolve(path: &Module, mods: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| mods.contains_key(p))
}

/// One crate's module graph (`crates/<dir>/src`).
fn import_graph(dir: &str) -> BTreeMap<Module, BTreeSet<Module>> {
    let mods = modules(&workspace_root().join("crates").join(dir).join("src"));
    let mut test_only: BTreeSet<Module> = BTreeSet::new();
    for (m, path) in &mods {
        let src = std::fs::read_to_string(path).expect("read module");
        for child in test_only_children(&src) {
            let mut c = m.clone();
            c.push(child);
            test_only.insert(c);
        }
    }
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, path) in &mods {
        if test_only.iter().any(|t| m.starts_with(t)) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(path).expect("read module"));
        for p in named_paths(&code, m) {
            if let Some(target) = resolve(&p, &mods) {
                if &target != m {
                    graph.entry(m.clone()).or_default().insert(target);
                }
            }
        }
    }
    graph
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit(w: &mut Walk<'_>, v: &Module) {
        let i = w.index.len();
        w.index.insert(v.clone(), i);
        w.low.insert(v.clone(), i);
        w.stack.push(v.clone());
        w.on_stack.insert(v.clone());
        let next: Vec<Module> = w.graph.get(v).into_iter().flatten().cloned().collect();
        for t in next {
            if !w.index.contains_key(&t) {
                visit(w, &t);
                let l = w.low[v].min(w.low[&t]);
                w.low.insert(v.clone(), l);
            } else if w.on_stack.contains(&t) {
                let l = w.low[v].min(w.index[&t]);
                w.low.insert(v.clone(), l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut comp = Vec::new();
            while let Some(t) = w.stack.pop() {
                w.on_stack.remove(&t);
                let done = &t == v;
                comp.push(t);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                w.found.push(comp);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

fn describe(graph: &BTreeMap<Module, BTreeSet<Module>>, comp: &[Module]) -> String {
    let set: BTreeSet<&Module> = comp.iter().collect();
    let mut lines = Vec::new();
    for a in comp {
        for b in graph.get(a).into_iter().flatten() {
            if set.contains(b) {
                lines.push(format!("    {} -> {}", name(a), name(b)));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

/// Rule (d), per file and per top-level module.
#[test]
fn rule_d_imports_point_one_way() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        found.extend(
            circles_in(&import_graph(&dir))
                .into_iter()
                .map(|c| format!("  in crates/{dir}:\n{c}")),
        );
    }
    assert!(found.is_empty(), "house rule d:\n{}", found.join("\n"));
}

/// The circles of one crate's graph, among its files. (Between crates the compiler forbids
/// them; a directory module that mixes layers, like the broker's `timer/`, is several files.)
fn circles_in(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    circles(graph)
        .iter()
        .map(|c| format!("  circle of {} modules:\n{}", c.len(), describe(graph, c)))
        .collect()
}

/// The `ringmq-*` crates a crate's Cargo.toml depends on (its `[dependencies]` table).
fn cargo_deps(dir: &str) -> BTreeSet<String> {
    let path = workspace_root().join("crates").join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(path).expect("read Cargo.toml");
    let deps = text
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("a [dependencies] table");
    deps.lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split([' ', '.', '=']).next())
        .filter(|n| n.starts_with("ringmq-"))
        .map(String::from)
        .collect()
}

/// ARCHITECTURE.md's crate table: `| \`ringmq-x\` | \`ringmq-y\`, ... | owns |` rows.
fn documented_crates() -> BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).expect("read");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Crates\n"))
        .expect("a Crates section");
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(name) = cells.get(1).and_then(|c| c.strip_prefix("`ringmq-")) else {
            continue;
        };
        let deps = cells[2]
            .split(',')
            .map(|d| d.trim().trim_matches('`'))
            .filter(|d| !d.is_empty())
            .map(String::from)
            .collect();
        out.insert(name.trim_end_matches('`').to_string(), deps);
    }
    out
}

/// Rule (e): the crate graph is the documented one, and the protocol crate's helpers sit below
/// the rest of it.
#[test]
fn rule_e_layers_hold() {
    let documented = documented_crates();
    let actual: BTreeMap<String, BTreeSet<String>> = crate_dirs()
        .into_iter()
        .map(|d| {
            let deps = cargo_deps(&d);
            (d, deps)
        })
        .collect();
    assert_eq!(
        actual, documented,
        "house rule e: crates/*/Cargo.toml and ARCHITECTURE.md's crate table differ"
    );
    let graph = import_graph("protocol");
    let mut found = Vec::new();
    for (a, targets) in &graph {
        for b in targets {
            let (Some(ta), Some(tb)) = (a.first(), b.first()) else {
                continue;
            };
            if ["common", "constants"].contains(&ta.as_str()) && ta != tb {
                found.push(format!("  {} -> {}", name(a), name(b)));
            }
        }
    }
    assert!(found.is_empty(), "house rule e:\n{}", found.join("\n"));
}

/// The walk finds what it should: a planted circle, a group import, `super::` paths, and code
/// under `#[cfg(test)]` left out.
#[test]
fn the_walk_finds_what_it_should() {
    let here: Module = vec!["broker".into(), "send".into()];
    let code = code_of(
        "use crate::broker::{append::{a, b}, error::BrokerError};\nuse super::shard::Shard;\n\
         // crate::nowhere::X\n#[cfg(test)]\nmod tests { use crate::store::Y; }\n",
    );
    let paths = named_paths(&code, &here);
    let has = |p: &[&str]| {
        paths
            .iter()
            .any(|x| x == &p.iter().map(|s| s.to_string()).collect::<Module>())
    };
    assert!(has(&["broker", "append", "a"]));
    assert!(has(&["broker", "error", "BrokerError"]));
    assert!(has(&["broker", "shard", "Shard"]));
    assert!(!paths
        .iter()
        .any(|p| p.first().is_some_and(|s| s == "store" || s == "nowhere")));
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    g.entry(m("a::x")).or_default().insert(m("a::y"));
    g.entry(m("a::y")).or_default().insert(m("a::z"));
    g.entry(m("a::z")).or_default().insert(m("a::x"));
    g.entry(m("a::z")).or_default().insert(m("b"));
    let c = circles(&g);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].len(), 3);
    assert!(test_only_children("#[cfg(test)]\nmod tests;\nmod real;") == vec!["tests".to_string()]);
}
