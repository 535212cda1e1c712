//! The Spanish word index: each document translated into Spanish and indexed with PostgreSQL's
//! 'spanish' configuration, so the words of a Spanish query as typed meet Spanish words.
//!
//! Why: most queries are Spanish and the catalog is English. Translating the query (see
//! `search::translate`) finds the documents that use the words Apertium picks ("viaja" →
//! "travels"), not the ones that say it another way ("journeys"); translating the documents
//! bridges the other way ("journeys" → "viajes", which the Spanish stemmer meets with "viaja").
//! Measured on both evaluation sets in `docs/measurements.md` ("The Spanish word index").
//!
//! Each document's whole text (the body that is also embedded: premise, titles, synopsis,
//! genres, themes) goes through one Apertium `eng-spa` pipeline, a document per line; the
//! titles are indexed at weight A as they are, the translation at weight C. A document is indexed
//! again only when its body or the translator changed (`lexical_es_hash`); a translated one keeps
//! its translation when a later run has no Apertium. Without Apertium, or
//! when it fails, the English body is indexed with the Spanish configuration instead (typed
//! Spanish still finds Spanish titles and synonyms, as before this index), marked so that the next
//! ingest with a working Apertium translates it.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
};

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::Command,
};

/// The stages of Apertium's `eng-spa` mode (Debian's `modes/eng-spa.mode`) with its text
/// deformatter around them, unknown words left unmarked; `{d}` is the data directory.
const PIPELINE: &str = "apertium-destxt \
    | lt-proc {d}/eng-spa.automorf.bin \
    | apertium-tagger -g {d}/eng-spa.prob \
    | apertium-pretransfer \
    | apertium-transfer -n {d}/apertium-eng-spa.eng-spa.genitive.t1x {d}/eng-spa.genitive.bin \
    | lt-proc -b {d}/eng-spa.autobil.bin \
    | lrx-proc -m {d}/eng-spa.autolex.bin \
    | apertium-transfer -b {d}/apertium-eng-spa.eng-spa.t1x {d}/eng-spa.t1x.bin \
    | apertium-interchunk {d}/apertium-eng-spa.eng-spa.t2x {d}/eng-spa.t2x.bin \
    | apertium-postchunk {d}/apertium-eng-spa.eng-spa.t3x {d}/eng-spa.t3x.bin \
    | lt-proc -n {d}/eng-spa.autogen.bin \
    | lt-proc -p {d}/eng-spa.autopgen.bin \
    | apertium-retxt";
/// What a document indexed from its English text is marked with (never a translator's name).
const UNTRANSLATED: &str = "untranslated";
/// What a document indexed from Apertium's translation is marked with.
const APERTIUM: &str = "apertium-eng-spa";
/// Documents written per statement.
const WRITE_BATCH: usize = 500;

/// Translates documents from English to Spanish with Apertium, many per run. It remembers what
/// it translated (keyed by the text's hash): a process that indexes the same documents again (a
/// test binary building one database per test) sends each text to Apertium once.
#[derive(Debug, Clone)]
pub struct DocumentTranslator {
    data_dir: PathBuf,
    done: Arc<tokio::sync::Mutex<HashMap<[u8; 32], String>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    #[error("running Apertium: {0}")]
    Io(#[from] std::io::Error),
    #[error("Apertium exited with {0}")]
    Failed(std::process::ExitStatus),
    #[error("Apertium returned {got} lines for {sent} documents")]
    LineCount { sent: usize, got: usize },
}

impl DocumentTranslator {
    /// The document translator `config` asks for (see its `apertium_dir`): ingest builds the
    /// Spanish word index from its translations.
    pub fn from_config(config: &crate::config::SearchConfig) -> Option<Self> {
        if config.apertium_dir.as_os_str() == "none" {
            return None;
        }
        Self::new(&config.apertium_dir)
    }

    /// A translator over Apertium's `eng-spa` data in `data_dir`; `None` when its files are
    /// not there (the pair is not installed).
    pub fn new(data_dir: &Path) -> Option<Self> {
        data_dir
            .join("eng-spa.automorf.bin")
            .is_file()
            .then(|| Self {
                data_dir: data_dir.to_path_buf(),
                done: Arc::default(),
            })
    }

    /// What goes into each document's `lexical_es_hash` besides its text.
    fn name(&self) -> &'static str {
        APERTIUM
    }

    /// The Spanish of each text, in order; texts translated before are not sent again. Callers
    /// take turns (the memo is held across the Apertium run): tests that load the demo at once
    /// would otherwise each start a pipeline before any had filled it.
    pub async fn translate(&self, texts: &[String]) -> Result<Vec<String>, TranslateError> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| Sha256::digest(t).into()).collect();
        let mut done = self.done.lock().await;
        let mut seen = std::collections::HashSet::new();
        let missing: Vec<String> = texts
            .iter()
            .zip(&keys)
            .filter(|(_, key)| !done.contains_key(*key) && seen.insert(**key))
            .map(|(text, _)| text.clone())
            .collect();
        if !missing.is_empty() {
            let spanish = self.run_apertium(&missing).await?;
            for (text, spanish) in missing.iter().zip(spanish) {
                done.insert(Sha256::digest(text).into(), spanish);
            }
        }
        Ok(keys.iter().map(|key| done[key].clone()).collect())
    }

    /// One Apertium run over `texts`. Each text is sent as one line (its line breaks become
    /// spaces), so line i of the output is text i.
    async fn run_apertium(&self, texts: &[String]) -> Result<Vec<String>, TranslateError> {
        let pipeline = PIPELINE.replace("{d}", &crate::files::shell_quoted(&self.data_dir));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(pipeline)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input: String = texts
            .iter()
            .map(|t| {
                let mut line: String = t
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                line.push('\n');
                line
            })
            .collect();
        // Written while the output is read: the pipeline holds only so much.
        let writer = tokio::spawn(async move {
            stdin.write_all(input.as_bytes()).await?;
            stdin.shutdown().await
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let mut out = Vec::with_capacity(texts.len());
        while let Some(line) = lines.next_line().await? {
            out.push(line);
        }
        writer.await.map_err(std::io::Error::other)??;
        let status = child.wait().await?;
        if !status.success() {
            return Err(TranslateError::Failed(status));
        }
        if out.len() != texts.len() {
            return Err(TranslateError::LineCount {
                sent: texts.len(),
                got: out.len(),
            });
        }
        Ok(out)
    }
}

/// What [`index`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpanishIndexReport {
    /// Documents indexed from their Spanish translation.
    pub translated: usize,
    /// Documents indexed from their English text (no translator, or it failed).
    pub untranslated: usize,
    /// Documents already indexed from their current text: by this translator, or (a run
    /// without one) by Apertium before.
    pub unchanged: usize,
    /// Why the translator could not be used, when it failed.
    pub translator_error: Option<String>,
}

impl std::fmt::Display for SpanishIndexReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "spanish word index: {} translated, {} from the English text, {} unchanged",
            self.translated, self.untranslated, self.unchanged
        )?;
        if let Some(error) = &self.translator_error {
            write!(f, " (Apertium failed: {error})")?;
        }
        Ok(())
    }
}

/// SQL for a document's `lexical_es_hash`: over what its index was built from (`source`, an SQL
/// expression: the translator's name, or `untranslated`) and its body `d.body`.
fn index_hash_sql(source: &str) -> String {
    format!("encode(sha256(convert_to({source} || E'\\n' || d.body, 'UTF8')), 'hex')")
}

/// Builds the Spanish word index of every document whose body or translator changed since it
/// was last built, then the index's document frequencies when anything changed.
pub async fn index(
    pool: &PgPool,
    translator: Option<&DocumentTranslator>,
) -> Result<SpanishIndexReport, sqlx::Error> {
    // Without a translator, a document Apertium translated and whose body has not changed keeps
    // its translation: a server started without Apertium must not make the index worse.
    let current: &[&str] = match translator {
        Some(t) => &[t.name()],
        None => &[UNTRANSLATED, APERTIUM],
    };
    // Compared in the database, so a run with nothing to do (every server start) reads no body.
    let stale: Vec<(i32, String)> = sqlx::query_as(&format!(
        "SELECT anime_id, body FROM documents d
         WHERE d.lexical_es_hash IS NULL
            OR d.lexical_es_hash <> ALL (SELECT {} FROM unnest($1::text[]) AS s(source))
         ORDER BY anime_id",
        index_hash_sql("source")
    ))
    .bind(current)
    .fetch_all(pool)
    .await?;
    let documents: i64 = sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(pool)
        .await?;
    let mut report = SpanishIndexReport {
        unchanged: documents as usize - stale.len(),
        ..Default::default()
    };
    if !stale.is_empty() {
        let bodies: Vec<String> = stale.iter().map(|(_, body)| body.clone()).collect();
        let translated = match translator {
            Some(t) => match t.translate(&bodies).await {
                Ok(spanish) => Some((t.name(), spanish)),
                Err(e) => {
                    tracing::warn!(error = %e, "Apertium failed: the Spanish word index is built from the English text");
                    report.translator_error = Some(e.to_string());
                    None
                }
            },
            None => None,
        };
        let (source, texts) = match translated {
            Some((name, spanish)) => {
                report.translated = stale.len();
                (name, spanish)
            }
            None => {
                report.untranslated = stale.len();
                (UNTRANSLATED, bodies.clone())
            }
        };
        let mut tx = pool.begin().await?;
        for (chunk, texts) in stale.chunks(WRITE_BATCH).zip(texts.chunks(WRITE_BATCH)) {
            let ids: Vec<i32> = chunk.iter().map(|(id, _)| *id).collect();
            sqlx::query(&format!(
                "UPDATE documents d SET
                     lexical_es = setweight(to_tsvector('spanish', coalesce(
                         (SELECT string_agg(t.title, ' | ' ORDER BY t.title) FROM anime_titles t
                          WHERE t.anime_id = d.anime_id), '')), 'A')
                         || setweight(to_tsvector('spanish', u.text), 'C'),
                     lexical_es_hash = {}
                 FROM unnest($1::int[], $2::text[]) AS u(anime_id, text)
                 WHERE d.anime_id = u.anime_id",
                index_hash_sql("$3")
            ))
            .bind(&ids)
            .bind(texts)
            .bind(source)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM lexeme_stats_es")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO lexeme_stats_es (lexeme, documents)
             SELECT word, ndoc FROM ts_stat('SELECT lexical_es FROM documents')",
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(report)
}

/// What [`synopses`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SynopsesReport {
    /// Synopses translated now.
    pub translated: usize,
    /// Why the translator could not be used, when it failed.
    pub translator_error: Option<String>,
}

impl std::fmt::Display for SynopsesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "spanish synopses: {} translated", self.translated)?;
        if let Some(error) = &self.translator_error {
            write!(f, " (Apertium failed: {error})")?;
        }
        Ok(())
    }
}

/// Synopses translated per Apertium run (bounds what one run holds in memory).
const SYNOPSES_PER_RUN: usize = 500;

/// Translates into Spanish every synopsis that has no translation of its current text yet
/// (`synopses_es`), paragraph by paragraph, for the anime page of the Spanish interface. Without
/// a translator nothing changes (translations made before are kept); if Apertium fails, the
/// page shows the English synopsis as before.
pub async fn synopses(
    pool: &PgPool,
    translator: Option<&DocumentTranslator>,
) -> Result<SynopsesReport, sqlx::Error> {
    let mut report = SynopsesReport::default();
    let Some(translator) = translator else {
        return Ok(report);
    };
    let source = format!("|{}", translator.name());
    let stale: Vec<(i32, String)> = sqlx::query_as(
        "SELECT a.id, a.description FROM anime a
           LEFT JOIN synopses_es s ON s.anime_id = a.id
          WHERE coalesce(a.description, '') <> ''
            AND s.source_hash IS DISTINCT FROM md5(a.description || $1)
          ORDER BY a.id",
    )
    .bind(&source)
    .fetch_all(pool)
    .await?;
    for chunk in stale.chunks(SYNOPSES_PER_RUN) {
        // One line per paragraph: Apertium keeps a line a line, and the page keeps paragraphs.
        let paragraphs: Vec<Vec<String>> = chunk
            .iter()
            .map(|(_, text)| {
                text.lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .collect();
        let flat: Vec<String> = paragraphs.iter().flatten().cloned().collect();
        let spanish = match translator.translate(&flat).await {
            Ok(spanish) => spanish,
            Err(error) => {
                tracing::warn!(%error, "Apertium failed: synopses stay in English");
                report.translator_error = Some(error.to_string());
                return Ok(report);
            }
        };
        let mut lines = spanish.into_iter();
        let texts: Vec<String> = paragraphs
            .iter()
            .map(|p| lines.by_ref().take(p.len()).collect::<Vec<_>>().join("\n"))
            .collect();
        let ids: Vec<i32> = chunk.iter().map(|(id, _)| *id).collect();
        sqlx::query(
            "INSERT INTO synopses_es (anime_id, description, source_hash)
             SELECT u.id, u.text, md5(a.description || $3)
               FROM unnest($1::int[], $2::text[]) AS u(id, text) JOIN anime a ON a.id = u.id
             ON CONFLICT (anime_id) DO UPDATE SET
                 description = excluded.description, source_hash = excluded.source_hash",
        )
        .bind(&ids)
        .bind(&texts)
        .bind(&source)
        .execute(pool)
        .await?;
        report.translated += chunk.len();
    }
    Ok(report)
}
