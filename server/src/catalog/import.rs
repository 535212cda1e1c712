//! Reading AniList Media JSONL (plain or gzip): the format of saved AniList pages flattened, of
//! `../shared/catalog/media.jsonl.gz` and of the bundled demo catalog.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
    path::Path,
};

use flate2::read::MultiGzDecoder;

use super::media::Media;

/// The bundled demo catalog (written for Zenbu, AniList's shape), loaded on first start.
pub const DEMO_CATALOG: &str = include_str!("../../data/demo_catalog.jsonl");

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {} invalid line(s), nothing imported:\n{}", .errors.len(), summarise(.errors))]
    Invalid {
        path: String,
        errors: Vec<(usize, String)>,
    },
}

fn summarise(errors: &[(usize, String)]) -> String {
    let mut lines: Vec<String> = errors
        .iter()
        .take(10)
        .map(|(line, error)| format!("  line {line}: {error}"))
        .collect();
    if errors.len() > 10 {
        lines.push(format!("  … and {} more", errors.len() - 10));
    }
    lines.join("\n")
}

/// Reads every Media object of a JSONL file (gzip detected by its magic bytes). All or nothing:
/// one bad line fails the whole file with the line numbers, so a half-read file never lands.
pub fn read_media_file(path: &Path) -> Result<Vec<Media>, ImportError> {
    let shown = path.display().to_string();
    let io_error = |source| ImportError::Io {
        path: shown.clone(),
        source,
    };
    let mut file = File::open(path).map_err(io_error)?;
    let mut magic = [0u8; 2];
    let gzip = file.read(&mut magic).map_err(io_error)? == 2 && magic == [0x1f, 0x8b];
    let file = File::open(path).map_err(io_error)?;
    let reader: Box<dyn BufRead> = if gzip {
        Box::new(BufReader::new(MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    read_media_lines(reader, &shown)
}

pub fn read_media_lines(reader: impl BufRead, source: &str) -> Result<Vec<Media>, ImportError> {
    let mut media = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| ImportError::Io {
            path: source.to_string(),
            source: e,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Media>(&line) {
            Ok(item) => media.push(item),
            Err(error) => errors.push((index + 1, error.to_string())),
        }
    }
    if !errors.is_empty() {
        return Err(ImportError::Invalid {
            path: source.to_string(),
            errors,
        });
    }
    Ok(media)
}

pub fn demo_catalog() -> Vec<Media> {
    read_media_lines(DEMO_CATALOG.as_bytes(), "demo catalog")
        .expect("the bundled demo catalog is valid (checked by a test)")
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn reads_plain_and_gzip_files_alike() {
        let dir = tempfile::tempdir().unwrap();
        let lines = "{\"id\": 1, \"title\": {\"romaji\": \"A\"}}\n\n{\"id\": 2}\n";
        let plain = dir.path().join("media.jsonl");
        std::fs::write(&plain, lines).unwrap();
        let gz = dir.path().join("media.jsonl.gz");
        let mut encoder =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
        encoder.write_all(lines.as_bytes()).unwrap();
        encoder.finish().unwrap();
        for path in [plain, gz] {
            let media = read_media_file(&path).unwrap();
            assert_eq!(media.iter().map(|m| m.id).collect::<Vec<_>>(), vec![1, 2]);
        }
    }

    #[test]
    fn a_bad_line_fails_the_file_and_names_the_line() {
        let error = read_media_lines("{\"id\": 1}\nnot json\n{\"title\": {}}\n".as_bytes(), "f")
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("2 invalid line(s), nothing imported"),
            "{message}"
        );
        assert!(
            message.contains("line 2:") && message.contains("line 3:"),
            "{message}"
        );
    }

    #[test]
    fn demo_catalog_is_valid_and_big_enough() {
        let demo = demo_catalog();
        assert!(demo.len() >= 150, "{} entries", demo.len());
        let ids: std::collections::HashSet<i32> = demo.iter().map(|m| m.id).collect();
        assert_eq!(ids.len(), demo.len(), "duplicate ids");
        assert!(demo.iter().all(|m| !m.is_adult()));
        // Relations stay inside the demo catalog, so its franchises are complete.
        for media in &demo {
            for edge in media.relation_edges() {
                assert!(
                    ids.contains(&edge.node.id),
                    "{} -> {}",
                    media.id,
                    edge.node.id
                );
            }
        }
        // It exercises the tag filter: some spoilers and some low-rank tags.
        let tags = demo.iter().flat_map(|m| &m.tags);
        let (spoilers, low): (Vec<_>, Vec<_>) = tags.partition(|t| t.is_spoiler());
        assert!(spoilers.len() >= 10);
        assert!(low.iter().filter(|t| t.rank.unwrap_or(0) < 50).count() >= 15);
    }
}
