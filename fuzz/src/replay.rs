//! The fuzz targets' inputs, replayed on stable through the same property checks: the seeds in
//! `fuzz/seeds/<target>/` and every input a fuzzing run found failing, kept in
//! `fuzz/regressions/<target>/`. `scripts/fuzz` runs the fuzzer itself.

use std::path::{Path, PathBuf};

use server::billing::webhook::{Change, read_delivery};

use crate as fuzz_checks;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// `../shared/catalog/media.jsonl.gz` beside the checkout (CI has it there too), or
/// `ZENBU_SHARED_CATALOG`.
fn shared_catalog() -> PathBuf {
    let path = std::env::var_os("ZENBU_SHARED_CATALOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/catalog/media.jsonl.gz")
        });
    assert!(
        path.exists(),
        "reference catalog missing at {}",
        path.display()
    );
    path
}

/// The saved inputs of `target` (seeds and regressions), by file name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    for folder in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(folder).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            found.push((
                format!(
                    "{folder}/{target}/{}",
                    path.file_name().unwrap().to_string_lossy()
                ),
                std::fs::read(&path).unwrap(),
            ));
        }
    }
    found.sort();
    found
}

fn replay(target: &str, check: fn(&[u8])) {
    let inputs = inputs(target);
    assert!(inputs.len() >= 3, "seeds of {target} missing");
    for (name, data) in inputs {
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("fuzz input {name} fails its check");
        }
    }
}

#[test]
fn query_inputs_hold() {
    replay("query", fuzz_checks::query);
}

#[test]
fn document_inputs_hold() {
    replay("document", fuzz_checks::document);
}

#[test]
fn cookie_inputs_hold() {
    replay("cookies", fuzz_checks::cookies);
}

#[test]
fn webhook_inputs_hold() {
    replay("webhook", fuzz_checks::webhook);
}

/// Every anime of the shared catalog through the document check: real AniList text (HTML,
/// entities, every script) is what the builder sees most.
#[test]
fn the_shared_catalog_holds_the_document_check() {
    use std::io::Read;
    let path = shared_catalog();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        fuzz_checks::document(line.as_bytes());
        checked += 1;
    }
    assert!(checked > 6000, "{checked} anime in {}", path.display());
}

/// The webhook seeds are events the reader understands, so the fuzzer starts past the parser's
/// front door (a seed it refused as unparsable would teach it little).
#[test]
fn webhook_seeds_are_read_as_the_events_they_are() {
    let secret = "whsec_seed";
    let now = 1_800_000_000;
    let read = |name: &str| {
        let payload = std::fs::read_to_string(fuzz_dir().join("seeds/webhook").join(name)).unwrap();
        let signature = fakes::stripe::sign(&payload, secret, now);
        read_delivery(secret, &payload, &signature, Some(now))
            .unwrap_or_else(|error| panic!("{name}: {error}"))
            .change
    };
    assert_eq!(
        read("checkout-completed.json"),
        Change::CheckoutCompleted {
            session: "cs_1".into(),
            user: Some(42),
            customer: Some("cus_1".into()),
            subscription: Some("sub_1".into()),
            paid: true,
            price: Some("price_1".into()),
        }
    );
    assert!(matches!(
        read("subscription-updated.json"),
        Change::Subscription { status, period_end: Some(_), .. } if status == "active"
    ));
    assert!(matches!(
        read("invoice-failed.json"),
        Change::PaymentFailed { subscription: Some(s), .. } if s == "sub_1"
    ));
    assert_eq!(read("other.json"), Change::Other);
}
