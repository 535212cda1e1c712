//! The server's top-level modules form no cycle: each may use the ones below it, never one that
//! uses it back (configuration is plain data at the bottom, the binary's wiring at the top). A
//! cycle is how a module ends up unable to change without another: this reads `crate::` paths in
//! the source, so it needs no build of its own.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use regex::Regex;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Which top-level modules each file's `crate::` paths name, by the file's own top-level module.
/// `sources` are (path under `src/`, text); comments are skipped.
fn module_edges(sources: &[(String, String)]) -> Graph {
    let modules: BTreeSet<String> = sources.iter().filter_map(|(path, _)| top(path)).collect();
    let path = Regex::new(r"crate::(\w+)").unwrap();
    let group = Regex::new(r"(?s)crate::\{(.*?)\};").unwrap();
    let mut graph = Graph::new();
    for (file, text) in sources {
        let Some(from) = top(file) else { continue };
        let code: String = text
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut named: Vec<String> = path
            .captures_iter(&code)
            .map(|c| c[1].to_string())
            .collect();
        for c in group.captures_iter(&code) {
            named.extend(group_heads(&c[1]));
        }
        let edges = graph.entry(from.clone()).or_default();
        edges.extend(
            named
                .into_iter()
                .filter(|m| modules.contains(m) && *m != from),
        );
    }
    graph
}

/// `accounts::x` for `src/accounts/x.rs`, `config` for `src/config.rs`; `None` for the crate roots.
fn top(path: &str) -> Option<String> {
    let first = path.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "main" | "lib")).then(|| name.to_string())
}

/// The first name of each item of a `use crate::{a, b::{c, d}, e::f}` group: `a`, `b`, `e`.
fn group_heads(body: &str) -> Vec<String> {
    let (mut heads, mut depth, mut item) = (Vec::new(), 0, String::new());
    for ch in body.chars().chain([',']) {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let head: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                heads.push(head);
                item.clear();
                continue;
            }
            _ => {}
        }
        item.push(ch);
    }
    heads
}

/// One cycle of `graph` (its modules in order, the first repeated at the end), if it has any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((relative, fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn the_server_modules_form_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let graph = module_edges(&files);
    assert!(
        graph.len() > 10,
        "read {} modules: the walk found no source",
        graph.len()
    );
    assert!(
        graph["startup"].contains("search"),
        "the edges were not read: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the server's top-level modules form a cycle: {}",
            cycle.join(" -> ")
        );
    }
}

/// The check sees a cycle closed through a `use crate::{...}` group and ignores comments.
#[test]
fn a_cycle_through_a_use_group_is_found() {
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let files = [
        file(
            "config.rs",
            "// crate::search in a comment is no edge\nuse crate::files;",
        ),
        file("files.rs", ""),
        file(
            "search/mod.rs",
            "use crate::{\n    catalog::document::{a, b},\n    files,\n};",
        ),
        file("catalog/mod.rs", "fn f() { crate::config::X }"),
        file("main.rs", "use crate::search;"),
    ];
    let graph = module_edges(&files);
    assert_eq!(graph["config"], BTreeSet::from(["files".to_string()]));
    let cycle = find_cycle(&graph);
    assert_eq!(cycle, None, "config -> files only: {graph:?}");
    let mut closed = files.to_vec();
    closed[0].1.push_str("\nuse crate::search::Engine;");
    let cycle = find_cycle(&module_edges(&closed)).expect("config -> search -> catalog -> config");
    assert_eq!(cycle.first(), cycle.last());
    assert!(cycle.contains(&"catalog".to_string()), "{cycle:?}");
}
