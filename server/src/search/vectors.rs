//! Document vectors: which documents still need one, computing them in batches, storing them per
//! model, and an append-only cache on disk keyed by (model version, content hash) so that a new
//! database on the same machine (CI, a test, a reset) never recomputes a vector it has seen.

use std::{
    collections::HashMap,
    fs::{self, File, OpenOptions},
    io::{Read, Write},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sqlx::PgPool;

use super::embedder::Embedder;

/// Documents per round trip: embedded together, then written in one transaction.
pub const BATCH: usize = 32;

/// What [`embed_missing`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct EmbedReport {
    pub model: String,
    /// Documents that had no vector for their current text.
    pub missing: usize,
    pub from_cache: usize,
    pub embedded: usize,
    #[serde(with = "crate::files::seconds")]
    pub elapsed: Duration,
    /// Documents the model embedded per second (cache hits left out).
    pub docs_per_second: f64,
    /// Passages (see `catalog::passages`) that had no vector for their current text, and how
    /// many the model embedded.
    pub passages_missing: usize,
    pub passages_embedded: usize,
}

impl std::fmt::Display for EmbedReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "vectors ({}): {} missing, {} from the disk cache, {} embedded at {:.2} docs/s; \
             passages: {} missing, {} embedded; {:.1} s",
            self.model,
            self.missing,
            self.from_cache,
            self.embedded,
            self.docs_per_second,
            self.passages_missing,
            self.passages_embedded,
            self.elapsed.as_secs_f64()
        )
    }
}

/// A document's text and its content hash, as the embedding pass reads it.
#[derive(sqlx::FromRow)]
struct DocumentText {
    anime_id: i32,
    body: String,
    content_hash: String,
}

/// One passage of an anime's document.
#[derive(sqlx::FromRow)]
struct PassageText {
    anime_id: i32,
    passage: i32,
    body: String,
}

/// The content hash a stored passage vector was made from.
#[derive(sqlx::FromRow)]
struct StoredPassageHash {
    anime_id: i32,
    passage: i32,
    content_hash: String,
}

/// Embeds every document of the embedder's model whose content hash has no vector yet, shortest
/// documents first so each batch holds texts of similar length.
pub async fn embed_missing(
    pool: &PgPool,
    embedder: &dyn Embedder,
    mut cache: Option<&mut VectorCache>,
    show_progress: bool,
) -> Result<EmbedReport> {
    let started = Instant::now();
    let model = embedder.model().to_string();
    // A second view hashes each body under its own name (`catalog::document::content_hash`,
    // in SQL), so its vectors follow the text, not the primary model the document was built for.
    let missing: Vec<DocumentText> = sqlx::query_as(
        "SELECT d.anime_id, d.body, h.content_hash FROM documents d
         CROSS JOIN LATERAL (SELECT CASE WHEN $2 THEN
             encode(sha256(convert_to($1 || E'\\n' || d.body, 'UTF8')), 'hex')
             ELSE d.content_hash END AS content_hash) h
         LEFT JOIN embeddings e
             ON e.anime_id = d.anime_id AND e.model = $1 AND e.content_hash = h.content_hash
         WHERE ($2 OR d.model = $1) AND e.anime_id IS NULL
         ORDER BY length(d.body), d.anime_id",
    )
    .bind(&model)
    .bind(embedder.embeds_any_document())
    .fetch_all(pool)
    .await?;
    let mut report = EmbedReport {
        model: model.clone(),
        missing: missing.len(),
        ..Default::default()
    };
    let progress = progress_bar(
        show_progress,
        missing.len(),
        "embedding {bar:30} {pos}/{len} documents, {per_sec}, eta {eta}",
    );
    let mut embedding_time = Duration::ZERO;
    for batch in missing.chunks(BATCH) {
        let items: Vec<(&str, &str)> = batch
            .iter()
            .map(|d| (d.body.as_str(), d.content_hash.as_str()))
            .collect();
        let began = Instant::now();
        let (vectors, embedded) =
            cached_or_embedded(embedder, cache.as_deref_mut(), &items).await?;
        if embedded > 0 {
            embedding_time += began.elapsed();
        }
        report.from_cache += batch.len() - embedded;
        report.embedded += embedded;
        let mut tx = pool.begin().await?;
        for (document, vector) in batch.iter().zip(&vectors) {
            sqlx::query(
                "INSERT INTO embeddings (anime_id, model, content_hash, embedding)
                 VALUES ($1, $2, $3, $4::vector)
                 ON CONFLICT (anime_id, model) DO UPDATE SET content_hash = EXCLUDED.content_hash,
                     embedding = EXCLUDED.embedding, embedded_at = now()",
            )
            .bind(document.anime_id)
            .bind(&model)
            .bind(&document.content_hash)
            .bind(pgvector::Vector::from(vector.to_vec()))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        progress.inc(batch.len() as u64);
    }
    progress.finish_and_clear();
    let (passages_missing, passages_embedded) =
        embed_missing_passages(pool, embedder, cache.as_deref_mut(), show_progress).await?;
    report.passages_missing = passages_missing;
    report.passages_embedded = passages_embedded;
    if let Some(cache) = cache {
        cache.flush()?;
    }
    report.elapsed = started.elapsed();
    report.docs_per_second = if report.embedded > 0 {
        report.embedded as f64 / embedding_time.as_secs_f64().max(1e-9)
    } else {
        0.0
    };
    Ok(report)
}

/// A progress bar of `len` steps drawn with `template`, or a hidden one when nothing is to be
/// shown.
fn progress_bar(show: bool, len: usize, template: &str) -> ProgressBar {
    if !show || len == 0 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    bar.set_style(ProgressStyle::with_template(template).expect("a valid template"));
    bar
}

/// The vectors of `items` (text, content hash): from the disk cache where it has them, else
/// embedded in one call (and added to the cache), in order; also how many were embedded.
async fn cached_or_embedded(
    embedder: &dyn Embedder,
    mut cache: Option<&mut VectorCache>,
    items: &[(&str, &str)],
) -> Result<(Vec<Vec<f32>>, usize)> {
    let mut vectors: Vec<Option<Vec<f32>>> = items
        .iter()
        .map(|(_, hash)| cache.as_ref().and_then(|c| c.get(hash)))
        .collect();
    let todo: Vec<usize> = (0..items.len()).filter(|&i| vectors[i].is_none()).collect();
    if !todo.is_empty() {
        let texts: Vec<String> = todo.iter().map(|&i| items[i].0.to_string()).collect();
        let fresh = embedder.embed_passages(&texts).await?;
        anyhow::ensure!(fresh.len() == todo.len(), "embedder returned a wrong count");
        for (&i, vector) in todo.iter().zip(fresh) {
            anyhow::ensure!(
                vector.len() == embedder.dimension(),
                "embedder returned {} dimensions, expected {}",
                vector.len(),
                embedder.dimension()
            );
            if let Some(cache) = cache.as_deref_mut() {
                cache.put(items[i].1, &vector)?;
            }
            vectors[i] = Some(vector);
        }
    }
    let vectors = vectors
        .into_iter()
        .map(|v| v.expect("filled above"))
        .collect();
    Ok((vectors, todo.len()))
}

/// Embeds every passage of the embedder's documents whose (position, content hash) has no
/// vector yet, and drops the vectors of passages a document no longer has. Passages share the
/// documents' disk cache: its keys are content hashes of model and text. Returns (missing,
/// embedded).
async fn embed_missing_passages(
    pool: &PgPool,
    embedder: &dyn Embedder,
    mut cache: Option<&mut VectorCache>,
    show_progress: bool,
) -> Result<(usize, usize)> {
    let model = embedder.model().to_string();
    let any_document = embedder.embeds_any_document();
    sqlx::query(
        "DELETE FROM passage_embeddings p USING documents d
         WHERE p.anime_id = d.anime_id AND p.model = $1
           AND ((NOT $2 AND d.model <> $1) OR p.passage > cardinality(d.passages))",
    )
    .bind(&model)
    .bind(any_document)
    .execute(pool)
    .await?;
    let stored: HashMap<(i32, i32), String> = sqlx::query_as::<_, StoredPassageHash>(
        "SELECT anime_id, passage, content_hash FROM passage_embeddings WHERE model = $1",
    )
    .bind(&model)
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|stored| ((stored.anime_id, stored.passage), stored.content_hash))
    .collect();
    let passages: Vec<PassageText> = sqlx::query_as(
        "SELECT d.anime_id, p.passage::int AS passage, p.body FROM documents d,
             unnest(d.passages) WITH ORDINALITY AS p(body, passage)
         WHERE $2 OR d.model = $1 ORDER BY length(p.body), d.anime_id, p.passage",
    )
    .bind(&model)
    .bind(any_document)
    .fetch_all(pool)
    .await?;
    let missing: Vec<(i32, i32, String, String)> = passages
        .into_iter()
        .filter_map(|p| {
            let hash = crate::catalog::document::content_hash(&model, &p.body);
            (stored.get(&(p.anime_id, p.passage)) != Some(&hash))
                .then_some((p.anime_id, p.passage, p.body, hash))
        })
        .collect();
    let progress = progress_bar(
        show_progress,
        missing.len(),
        "passages {bar:30} {pos}/{len}, {per_sec}, eta {eta}",
    );
    let mut embedded = 0;
    for batch in missing.chunks(BATCH * 4) {
        let items: Vec<(&str, &str)> = batch
            .iter()
            .map(|(_, _, text, hash)| (text.as_str(), hash.as_str()))
            .collect();
        let (vectors, fresh) = cached_or_embedded(embedder, cache.as_deref_mut(), &items).await?;
        embedded += fresh;
        let mut tx = pool.begin().await?;
        for ((anime_id, passage, _, hash), vector) in batch.iter().zip(&vectors) {
            sqlx::query(
                "INSERT INTO passage_embeddings (anime_id, model, passage, content_hash, embedding)
                 VALUES ($1, $2, $3, $4, $5::vector)
                 ON CONFLICT (anime_id, model, passage) DO UPDATE
                     SET content_hash = EXCLUDED.content_hash, embedding = EXCLUDED.embedding",
            )
            .bind(anime_id)
            .bind(&model)
            .bind(passage)
            .bind(hash)
            .bind(pgvector::Vector::from(vector.to_vec()))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        progress.inc(batch.len() as u64);
    }
    progress.finish_and_clear();
    Ok((missing.len(), embedded))
}

/// Vectors on disk, one append-only file per model version:
/// records of 32 bytes of content hash then `dimension` little-endian f32s. A torn last record
/// (a crash mid-write) and records that are not unit vectors are skipped on load.
pub struct VectorCache {
    path: PathBuf,
    dimension: usize,
    known: HashMap<[u8; 32], Vec<f32>>,
    pending: Vec<u8>,
}

impl VectorCache {
    /// Opens (or starts) the cache for `version` under `dir`.
    pub fn open(dir: &Path, version: &str, dimension: usize) -> Result<Self> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let safe: String = version
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{safe}.{dimension}d.vectors"));
        let mut known = HashMap::new();
        let _lock = FileLock::exclusive(&path)?;
        if path.exists() {
            let mut bytes = Vec::new();
            File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .with_context(|| format!("reading {}", path.display()))?;
            let record = 32 + dimension * 4;
            let whole = bytes.len() / record * record;
            if whole < bytes.len() {
                // Drop a torn tail so the next append starts on a record boundary.
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(whole as u64))
                    .with_context(|| format!("truncating {}", path.display()))?;
            }
            for chunk in bytes.chunks_exact(record) {
                let hash: [u8; 32] = chunk[..32].try_into().expect("32 bytes");
                let vector: Vec<f32> = chunk[32..]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                    .collect();
                let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
                if (norm - 1.0).abs() < 1e-3 {
                    known.insert(hash, vector);
                }
            }
        }
        Ok(Self {
            path,
            dimension,
            known,
            pending: Vec::new(),
        })
    }

    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    pub fn get(&self, content_hash: &str) -> Option<Vec<f32>> {
        self.known.get(&key(content_hash)?).cloned()
    }

    fn put(&mut self, content_hash: &str, vector: &[f32]) -> Result<()> {
        let Some(key) = key(content_hash) else {
            return Ok(());
        };
        anyhow::ensure!(
            vector.len() == self.dimension,
            "wrong dimension for the cache"
        );
        if self.known.insert(key, vector.to_vec()).is_none() {
            self.pending.extend_from_slice(&key);
            for x in vector {
                self.pending.extend_from_slice(&x.to_le_bytes());
            }
        }
        if self.pending.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(())
    }

    /// Appends what was added since the last flush, in one write.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let _lock = FileLock::exclusive(&self.path)?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))?;
        file.write_all(&self.pending)
            .and_then(|()| file.sync_data())
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.pending.clear();
        Ok(())
    }
}

/// An exclusive `flock` on `<file>.lock`, held while a process reads-and-repairs or appends to
/// the cache file, so two processes (say `serve` and `ingest`) never see each other's half
/// written records. Released when dropped (closing the descriptor releases the lock).
struct FileLock {
    _held: File,
}

impl FileLock {
    fn exclusive(file: &Path) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let mut name = file.as_os_str().to_owned();
        name.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&name)
            .with_context(|| format!("opening {}", Path::new(&name).display()))?;
        // SAFETY: flock on a descriptor this function owns; blocks until the lock is free.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).context("locking the vector cache");
        }
        Ok(Self { _held: lock })
    }
}

/// A content hash (64 hex digits) as 32 bytes; anything else is not cached.
fn key(content_hash: &str) -> Option<[u8; 32]> {
    if content_hash.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(content_hash.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Vectors for every document that lacks one, through `embedder` and the disk cache in
/// `<cache dir>/vectors` (what `server embed-documents` and the server's start run).
pub async fn embed_documents(
    config: &crate::config::Config,
    pool: &PgPool,
    embedder: &dyn Embedder,
) -> Result<EmbedReport> {
    let mut cache = VectorCache::open(
        &config.db.embedded.cache_dir().join("vectors"),
        &embedder.cache_version(),
        embedder.dimension(),
    )?;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    embed_missing(pool, embedder, Some(&mut cache), progress).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dimension: usize, hot: usize) -> Vec<f32> {
        let mut v = vec![0.0; dimension];
        v[hot] = 1.0;
        v
    }

    #[test]
    fn the_cache_survives_a_reopen_and_skips_a_torn_record() {
        let dir = tempfile::tempdir().unwrap();
        let hash = "ab".repeat(32);
        let mut cache = VectorCache::open(dir.path(), "m/v1", 4).unwrap();
        cache.put(&hash, &unit(4, 2)).unwrap();
        cache.put("not-a-hash", &unit(4, 1)).unwrap();
        cache.flush().unwrap();
        let file = dir.path().join("m_v1.4d.vectors");
        // A second record cut short, as after a crash mid-write.
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(&[7u8; 40]).unwrap();

        let reopened = VectorCache::open(dir.path(), "m/v1", 4).unwrap();
        assert_eq!(reopened.len(), 1);
        assert_eq!(reopened.get(&hash), Some(unit(4, 2)));
        assert_eq!(reopened.get(&"cd".repeat(32)), None);
        // The torn tail was cut, so later records line up again.
        let mut reopened = reopened;
        reopened.put(&"cd".repeat(32), &unit(4, 0)).unwrap();
        reopened.flush().unwrap();
        let again = VectorCache::open(dir.path(), "m/v1", 4).unwrap();
        assert_eq!(again.get(&"cd".repeat(32)), Some(unit(4, 0)));
        assert_eq!(again.len(), 2);
    }
}
