//! Catalog writes. Everything compares before it writes, so re-ingesting unchanged data touches
//! no row (and the search issue's "embed only what changed" stays true).

use std::collections::HashMap;

use futures_util::{StreamExt, stream};
use sha2::{Digest, Sha256};
use sqlx::{PgPool, Postgres, Transaction, types::Json};

use super::{
    document::{self, Premise},
    franchise::{self, Franchise, LOCAL_GENERATOR},
    media::Media,
    premise::{LlmPremiser, PremiseError},
};

/// LLM premise requests in flight at once.
const LLM_CONCURRENCY: usize = 4;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LoadCounts {
    pub received: usize,
    pub skipped_adult: usize,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
}

impl std::ops::AddAssign for LoadCounts {
    fn add_assign(&mut self, other: Self) {
        self.received += other.received;
        self.skipped_adult += other.skipped_adult;
        self.inserted += other.inserted;
        self.updated += other.updated;
        self.unchanged += other.unchanged;
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DocumentCounts {
    pub anime: usize,
    pub franchises: usize,
    pub franchises_with_premise: usize,
    pub premises_created: usize,
    /// Franchises whose LLM premise failed and that got the local one.
    pub premise_fallbacks: usize,
    pub documents_written: usize,
    pub documents_unchanged: usize,
    /// Anime with a missing or partial popularity whose estimate changed
    /// ([`super::popularity`]).
    pub popularity_estimates_changed: i64,
}

/// sha256 of the Media as we store it; equal hashes mean nothing to write.
pub fn source_hash(media: &Media) -> String {
    let json = serde_json::to_string(media).expect("Media always serialises");
    hex::encode(Sha256::digest(json.as_bytes()))
}

/// An anime's stored source hash, to tell whether a new copy of it changed.
#[derive(sqlx::FromRow)]
struct StoredSourceHash {
    id: i32,
    source_hash: String,
}

/// Upserts `batch` in one transaction: new anime inserted, changed ones updated (with their
/// relation edges replaced), unchanged ones left alone. Adult entries are skipped unless asked.
pub async fn upsert_media(
    pool: &PgPool,
    batch: &[Media],
    include_adult: bool,
) -> Result<LoadCounts, sqlx::Error> {
    let mut counts = LoadCounts {
        received: batch.len(),
        ..Default::default()
    };
    let mut tx = pool.begin().await?;
    let ids: Vec<i32> = batch.iter().map(|m| m.id).collect();
    let mut known: HashMap<i32, String> = sqlx::query_as::<_, StoredSourceHash>(
        "SELECT id, source_hash FROM anime WHERE id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.id, row.source_hash))
    .collect();
    for media in batch {
        let media = &media.without_nul();
        if media.is_adult() && !include_adult {
            counts.skipped_adult += 1;
            continue;
        }
        let hash = source_hash(media);
        match known.get(&media.id) {
            Some(stored) if *stored == hash => {
                counts.unchanged += 1;
                continue;
            }
            Some(_) => counts.updated += 1,
            None => counts.inserted += 1,
        }
        write_anime(&mut tx, media, &hash).await?;
        known.insert(media.id, hash);
    }
    tx.commit().await?;
    Ok(counts)
}

/// Writes one anime: its row, then its relation edges in place of the old ones.
async fn write_anime(
    tx: &mut Transaction<'_, Postgres>,
    media: &Media,
    hash: &str,
) -> Result<(), sqlx::Error> {
    upsert_anime_row(tx, media, hash).await?;
    replace_relations(tx, media).await
}

async fn upsert_anime_row(
    tx: &mut Transaction<'_, Postgres>,
    media: &Media,
    hash: &str,
) -> Result<(), sqlx::Error> {
    let start = media.start_date.unwrap_or_default();
    sqlx::query(
        "INSERT INTO anime (id, id_mal, title_romaji, title_english, title_native, synonyms,
             format, season, season_year, start_year, start_month, start_day, description_raw,
             description, genres, tags, average_score, popularity, is_adult, raw, source_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                 $19, $20, $21)
         ON CONFLICT (id) DO UPDATE SET
             id_mal = EXCLUDED.id_mal, title_romaji = EXCLUDED.title_romaji,
             title_english = EXCLUDED.title_english, title_native = EXCLUDED.title_native,
             synonyms = EXCLUDED.synonyms, format = EXCLUDED.format, season = EXCLUDED.season,
             season_year = EXCLUDED.season_year, start_year = EXCLUDED.start_year,
             start_month = EXCLUDED.start_month, start_day = EXCLUDED.start_day,
             description_raw = EXCLUDED.description_raw, description = EXCLUDED.description,
             genres = EXCLUDED.genres, tags = EXCLUDED.tags,
             average_score = EXCLUDED.average_score, popularity = EXCLUDED.popularity,
             is_adult = EXCLUDED.is_adult, raw = EXCLUDED.raw,
             source_hash = EXCLUDED.source_hash, updated_at = now()",
    )
    .bind(media.id)
    .bind(media.id_mal)
    .bind(&media.title.romaji)
    .bind(&media.title.english)
    .bind(&media.title.native)
    .bind(&media.synonyms)
    .bind(&media.format)
    .bind(&media.season)
    .bind(media.season_year)
    .bind(start.year)
    .bind(start.month)
    .bind(start.day)
    .bind(&media.description)
    .bind(
        media
            .description
            .as_deref()
            .map(document::clean_description),
    )
    .bind(&media.genres)
    .bind(Json(&media.tags))
    .bind(media.average_score)
    .bind(media.popularity)
    .bind(media.is_adult())
    .bind(Json(media))
    .bind(hash)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn replace_relations(
    tx: &mut Transaction<'_, Postgres>,
    media: &Media,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM anime_relations WHERE anime_id = $1")
        .bind(media.id)
        .execute(&mut **tx)
        .await?;
    let edges = media.relation_edges();
    sqlx::query(
        "INSERT INTO anime_relations (anime_id, related_id, relation_type, related_format)
         SELECT $1, * FROM UNNEST($2::int[], $3::text[], $4::text[])
         ON CONFLICT DO NOTHING",
    )
    .bind(media.id)
    .bind(edges.iter().map(|e| e.node.id).collect::<Vec<_>>())
    .bind(
        edges
            .iter()
            .map(|e| e.relation_type.clone())
            .collect::<Vec<_>>(),
    )
    .bind(
        edges
            .iter()
            .map(|e| e.node.format.clone())
            .collect::<Vec<_>>(),
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Recomputes franchises, premises, documents and the popularity estimates from the stored
/// catalog, writing only what changed. `model` is the embedding model whose name goes into each
/// content hash; with a `premiser`, franchises get LLM-written premises (the local one when the
/// model fails).
pub async fn rebuild_documents(
    pool: &PgPool,
    model: &str,
    premiser: Option<&LlmPremiser>,
) -> Result<DocumentCounts, sqlx::Error> {
    let catalog: Vec<Media> =
        sqlx::query_scalar::<_, Json<Media>>("SELECT raw FROM anime ORDER BY id")
            .fetch_all(pool)
            .await?
            .into_iter()
            .map(|json| json.0)
            .collect();
    let by_id: HashMap<i32, &Media> = catalog.iter().map(|m| (m.id, m)).collect();
    let franchises = franchise::franchises(&catalog);
    let mut counts = DocumentCounts {
        anime: catalog.len(),
        franchises: franchises.len(),
        ..Default::default()
    };
    let premises = Premises::find_or_make(pool, &franchises, &by_id, premiser).await?;
    counts.premise_fallbacks = premises.llm_failures;
    counts.premises_created = premises.made.len();
    counts.franchises_with_premise = premises.texts.iter().flatten().count();
    let premise_of = premises.by_member(&franchises, &by_id);

    let mut tx = pool.begin().await?;
    write_franchises(&mut tx, &franchises).await?;
    store_premises(&mut tx, &premises.made).await?;
    (counts.documents_written, counts.documents_unchanged) =
        write_documents(&mut tx, &catalog, &premise_of, model).await?;
    refresh_lexeme_stats(&mut tx, counts.documents_written > 0).await?;
    counts.popularity_estimates_changed = super::popularity::estimate(&mut tx).await?;
    tx.commit().await?;
    Ok(counts)
}

/// A row of `franchise_premises`: the premise `generator` wrote for the franchise of `root_id`
/// from the inputs whose hash is `inputs_hash` (so a changed franchise gets a new one).
#[derive(Debug, Clone, sqlx::FromRow)]
struct StoredPremise {
    root_id: i32,
    generator: String,
    inputs_hash: String,
    premise: String,
}

/// Stored premises by franchise root, generator and inputs hash.
type PremiseIndex = HashMap<(i32, String, String), String>;

/// The premise of each franchise, in the order of the franchises.
struct Premises {
    /// `None`: no premise could be made (a franchise without a synopsis).
    texts: Vec<Option<String>>,
    /// Premises made in this run, to be stored.
    made: Vec<StoredPremise>,
    /// Franchises whose LLM premise failed and that got the local one.
    llm_failures: usize,
}

impl Premises {
    /// Reuses a stored premise for the same franchise, generator and inputs; otherwise makes one
    /// (LLM calls run a few at a time, outside any transaction), the local generator's when
    /// there is no LLM or it fails.
    async fn find_or_make(
        pool: &PgPool,
        franchises: &[Franchise],
        by_id: &HashMap<i32, &Media>,
        premiser: Option<&LlmPremiser>,
    ) -> Result<Self, sqlx::Error> {
        let generator = premiser
            .map(LlmPremiser::generator)
            .unwrap_or_else(|| LOCAL_GENERATOR.to_string());
        let stored = stored_premises(pool, &generator).await?;
        let inputs: Vec<String> = franchises
            .iter()
            .map(|f| franchise::premise_inputs_hash(f, by_id))
            .collect();
        let texts = franchises
            .iter()
            .zip(&inputs)
            .map(|(f, hash)| {
                stored
                    .get(&(f.root_id, generator.clone(), hash.clone()))
                    .cloned()
            })
            .collect();
        let mut premises = Premises {
            texts,
            made: Vec::new(),
            llm_failures: 0,
        };
        if let Some(premiser) = premiser {
            premises
                .ask_llm(premiser, &generator, franchises, &inputs, by_id)
                .await;
        }
        premises.fill_with_local(franchises, &inputs, &stored, by_id);
        Ok(premises)
    }

    /// Asks the LLM for every premise still missing.
    async fn ask_llm(
        &mut self,
        premiser: &LlmPremiser,
        generator: &str,
        franchises: &[Franchise],
        inputs: &[String],
        by_id: &HashMap<i32, &Media>,
    ) {
        let missing: Vec<usize> = (0..franchises.len())
            .filter(|&i| self.texts[i].is_none())
            .collect();
        let answers: Vec<(usize, Result<String, PremiseError>)> = stream::iter(missing)
            .map(|i| {
                let (root_title, members) = premise_inputs(&franchises[i], by_id);
                async move { (i, premiser.premise(&root_title, &members).await) }
            })
            .buffer_unordered(LLM_CONCURRENCY)
            .collect()
            .await;
        for (i, answer) in answers {
            match answer {
                Ok(text) => {
                    self.made.push(StoredPremise {
                        root_id: franchises[i].root_id,
                        generator: generator.to_string(),
                        inputs_hash: inputs[i].clone(),
                        premise: text.clone(),
                    });
                    self.texts[i] = Some(text);
                }
                Err(error) => {
                    tracing::warn!(root = franchises[i].root_id, %error, "LLM premise failed: using the local one");
                    self.llm_failures += 1;
                }
            }
        }
    }

    /// Whatever has no premise yet gets the local one (stored or made now).
    fn fill_with_local(
        &mut self,
        franchises: &[Franchise],
        inputs: &[String],
        stored: &PremiseIndex,
        by_id: &HashMap<i32, &Media>,
    ) {
        for (i, franchise) in franchises.iter().enumerate() {
            if self.texts[i].is_some() {
                continue;
            }
            let key = (
                franchise.root_id,
                LOCAL_GENERATOR.to_string(),
                inputs[i].clone(),
            );
            self.texts[i] = match stored.get(&key) {
                Some(text) => Some(text.clone()),
                None => franchise::local_premise(franchise, by_id).map(|premise| {
                    let (root_id, generator, inputs_hash) = key;
                    self.made.push(StoredPremise {
                        root_id,
                        generator,
                        inputs_hash,
                        premise: premise.text.clone(),
                    });
                    premise.text
                }),
            };
        }
    }

    /// The premise each franchise member's document opens with (the root's own has none).
    fn by_member(
        &self,
        franchises: &[Franchise],
        by_id: &HashMap<i32, &Media>,
    ) -> HashMap<i32, Premise> {
        let mut premise_of = HashMap::new();
        for (franchise, text) in franchises.iter().zip(&self.texts) {
            let Some(text) = text else { continue };
            let root_title = by_id[&franchise.root_id]
                .main_title()
                .unwrap_or_default()
                .to_string();
            let premise = Premise {
                root_title,
                text: text.clone(),
            };
            for &member in franchise
                .members
                .iter()
                .filter(|&&id| id != franchise.root_id)
            {
                premise_of.insert(member, premise.clone());
            }
        }
        premise_of
    }
}

/// The stored premises of `generator` and of the local generator (the fallback).
async fn stored_premises(pool: &PgPool, generator: &str) -> Result<PremiseIndex, sqlx::Error> {
    let rows = sqlx::query_as::<_, StoredPremise>(
        "SELECT root_id, generator, inputs_hash, premise FROM franchise_premises
          WHERE generator = ANY($1)",
    )
    .bind(vec![generator.to_string(), LOCAL_GENERATOR.to_string()])
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ((row.root_id, row.generator, row.inputs_hash), row.premise))
        .collect())
}

async fn store_premises(
    tx: &mut Transaction<'_, Postgres>,
    made: &[StoredPremise],
) -> Result<(), sqlx::Error> {
    for row in made {
        sqlx::query(
            "INSERT INTO franchise_premises (root_id, generator, inputs_hash, premise)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(row.root_id)
        .bind(&row.generator)
        .bind(&row.inputs_hash)
        .bind(&row.premise)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The hashes a stored document was built with: equal ones mean it need not be written again.
#[derive(sqlx::FromRow)]
struct StoredDocumentHashes {
    anime_id: i32,
    content_hash: String,
    model: String,
    lexical_hash: Option<String>,
}

/// An anime's document and everything indexed beside it, as built from the catalog.
struct BuiltDocument {
    body: String,
    /// Over the body and the embedding model: a new one means a new vector.
    content_hash: String,
    lexical: document::LexicalFields,
    themes: Option<String>,
    passages: Vec<String>,
    /// One hash over what is indexed beside the body: lexical fields and passages. The theme
    /// vector is not in it: it depends on the whole catalog ([`write_themes`]).
    lexical_hash: String,
}

impl BuiltDocument {
    fn build(
        media: &Media,
        premise: Option<&Premise>,
        themes: &document::ThemeFrequencies,
        model: &str,
    ) -> Self {
        let body = document::build_document(media, premise);
        let content_hash = document::content_hash(model, &body);
        let lexical = document::lexical_fields(media, premise);
        let themes = document::theme_vector(media, themes);
        let passages = super::passages::passages(media, premise);
        let lexical_hash = hex::encode(Sha256::digest(format!(
            "{}\n{}",
            lexical.hash(),
            passages.join("\n")
        )));
        Self {
            body,
            content_hash,
            lexical,
            themes,
            passages,
            lexical_hash,
        }
    }

    fn matches(&self, stored: &StoredDocumentHashes, model: &str) -> bool {
        stored.content_hash == self.content_hash
            && stored.model == model
            && stored.lexical_hash.as_deref() == Some(self.lexical_hash.as_str())
    }
}

/// Writes the documents (and title lists) that differ from the stored ones; returns how many
/// were written and how many were already up to date.
async fn write_documents(
    tx: &mut Transaction<'_, Postgres>,
    catalog: &[Media],
    premise_of: &HashMap<i32, Premise>,
    model: &str,
) -> Result<(usize, usize), sqlx::Error> {
    let existing: HashMap<i32, StoredDocumentHashes> = sqlx::query_as::<_, StoredDocumentHashes>(
        "SELECT anime_id, content_hash, model, lexical_hash FROM documents",
    )
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .map(|row| (row.anime_id, row))
    .collect();
    let (mut written, mut unchanged) = (0, 0);
    let frequencies = document::ThemeFrequencies::of(catalog);
    let mut themes = Vec::with_capacity(catalog.len());
    for media in catalog {
        let built = BuiltDocument::build(media, premise_of.get(&media.id), &frequencies, model);
        themes.push((media.id, built.themes.clone()));
        if existing
            .get(&media.id)
            .is_some_and(|stored| built.matches(stored, model))
        {
            unchanged += 1;
            continue;
        }
        write_document(tx, media, &built, model).await?;
        written += 1;
    }
    write_themes(tx, themes).await?;
    Ok((written, unchanged))
}

/// Theme vectors weigh each theme by how many anime of the catalog carry it, so one changed
/// anime can change others' vectors: they are written apart from the documents, in one
/// statement that touches only the rows whose vector changed.
async fn write_themes(
    tx: &mut Transaction<'_, Postgres>,
    themes: Vec<(i32, Option<String>)>,
) -> Result<(), sqlx::Error> {
    let (ids, vectors): (Vec<i32>, Vec<Option<String>>) = themes.into_iter().unzip();
    sqlx::query(
        "UPDATE documents d SET themes = t.themes::sparsevec
         FROM unnest($1::int[], $2::text[]) AS t(anime_id, themes)
         WHERE d.anime_id = t.anime_id AND d.themes IS DISTINCT FROM t.themes::sparsevec",
    )
    .bind(ids)
    .bind(vectors)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Upserts one document and replaces the anime's titles (the trigram title index).
async fn write_document(
    tx: &mut Transaction<'_, Postgres>,
    media: &Media,
    built: &BuiltDocument,
    model: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO documents (anime_id, body, model, content_hash, lexical, lexical_hash,
                                themes, passages)
         VALUES ($1, $2, $3, $4,
             setweight(to_tsvector('english', $5), 'A')
             || setweight(to_tsvector('english', $6), 'B')
             || setweight(to_tsvector('english', $7), 'C'),
             $8, $9::sparsevec, $10)
         ON CONFLICT (anime_id) DO UPDATE SET body = EXCLUDED.body, model = EXCLUDED.model,
             content_hash = EXCLUDED.content_hash, lexical = EXCLUDED.lexical,
             lexical_hash = EXCLUDED.lexical_hash, themes = EXCLUDED.themes,
             passages = EXCLUDED.passages, built_at = now()",
    )
    .bind(media.id)
    .bind(&built.body)
    .bind(model)
    .bind(&built.content_hash)
    .bind(&built.lexical.titles)
    .bind(&built.lexical.topics)
    .bind(&built.lexical.text)
    .bind(&built.lexical_hash)
    .bind(&built.themes)
    .bind(&built.passages)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM anime_titles WHERE anime_id = $1")
        .bind(media.id)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO anime_titles (anime_id, title) SELECT $1, unnest($2::text[])
         ON CONFLICT DO NOTHING",
    )
    .bind(media.id)
    .bind(document::titles(media))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Document frequencies for the lexical branch's choice of query words: recomputed when a
/// document changed, or when they are missing (a database made before they existed; without
/// them the lexical branch finds nothing).
async fn refresh_lexeme_stats(
    tx: &mut Transaction<'_, Postgres>,
    documents_changed: bool,
) -> Result<(), sqlx::Error> {
    let stats_missing: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM lexeme_stats)")
        .fetch_one(&mut **tx)
        .await?;
    if documents_changed || stats_missing {
        sqlx::query("DELETE FROM lexeme_stats")
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "INSERT INTO lexeme_stats (lexeme, documents)
             SELECT word, ndoc FROM ts_stat('SELECT lexical FROM documents')",
        )
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// What the LLM sees of a franchise: the root's title and each member's title and synopsis.
fn premise_inputs(
    franchise: &Franchise,
    by_id: &HashMap<i32, &Media>,
) -> (String, Vec<(String, String)>) {
    let title = |media: &Media| media.main_title().unwrap_or_default().to_string();
    let root_title = by_id
        .get(&franchise.root_id)
        .map(|m| title(m))
        .unwrap_or_default();
    let members = franchise
        .members
        .iter()
        .filter_map(|id| by_id.get(id))
        .map(|media| {
            let synopsis = media
                .description
                .as_deref()
                .map(document::clean_description)
                .unwrap_or_default();
            (title(media), synopsis)
        })
        .collect();
    (root_title, members)
}

/// Makes the `franchises` table and `anime.franchise_root_id` match `franchises`, touching only
/// rows that differ.
async fn write_franchises(
    tx: &mut Transaction<'_, Postgres>,
    franchises: &[Franchise],
) -> Result<(), sqlx::Error> {
    let roots: Vec<i32> = franchises.iter().map(|f| f.root_id).collect();
    let sizes: Vec<i32> = franchises.iter().map(|f| f.members.len() as i32).collect();
    sqlx::query(
        "INSERT INTO franchises (root_id, member_count) SELECT * FROM UNNEST($1::int[], $2::int[])
         ON CONFLICT (root_id) DO UPDATE SET member_count = EXCLUDED.member_count
         WHERE franchises.member_count IS DISTINCT FROM EXCLUDED.member_count",
    )
    .bind(&roots)
    .bind(&sizes)
    .execute(&mut **tx)
    .await?;

    let (members, member_roots): (Vec<i32>, Vec<i32>) = franchises
        .iter()
        .flat_map(|f| f.members.iter().map(move |&m| (m, f.root_id)))
        .unzip();
    sqlx::query(
        "UPDATE anime SET franchise_root_id = assigned.root_id
         FROM (SELECT a.id, f.root_id FROM anime a
               LEFT JOIN UNNEST($1::int[], $2::int[]) AS f(member_id, root_id) ON f.member_id = a.id
              ) AS assigned
         WHERE anime.id = assigned.id
           AND anime.franchise_root_id IS DISTINCT FROM assigned.root_id",
    )
    .bind(&members)
    .bind(&member_roots)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM franchises WHERE root_id <> ALL($1)")
        .bind(&roots)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The stored document of `id` and the one the template gives without a premise; `None` when
/// the anime or its document is missing.
pub async fn document_with_and_without_premise(
    pool: &PgPool,
    id: i32,
) -> Result<Option<(String, String)>, sqlx::Error> {
    let row: Option<DocumentAndSource> = sqlx::query_as(
        "SELECT d.body, a.raw FROM documents d JOIN anime a ON a.id = d.anime_id WHERE a.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| (row.body, document::build_document(&row.raw.0, None))))
}

/// An anime's stored document beside the AniList entry it was built from.
#[derive(sqlx::FromRow)]
struct DocumentAndSource {
    body: String,
    raw: Json<Media>,
}
