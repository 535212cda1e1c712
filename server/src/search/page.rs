//! The page's assembly, the pipeline's last stage: the served order cut to a page, each hit
//! with its card, the evidence that found it, and the passage nearest the query.

use std::collections::HashMap;

use app::search::{Branch, Filters, SearchHit};
use sqlx::PgPool;

use super::{PAGE_SIZE, Ranked, Retrieval, SearchError, fusion::Fused, lexical, parts, vector};

/// The page laid out from the served order.
pub struct Layout {
    /// [`Ranked::order`] with the parts of its leading works placed ([`parts::placed`]),
    /// before it is cut to the page.
    pub served: Vec<i32>,
    /// Its first [`PAGE_SIZE`], each with its card, the evidence that found it and, for those
    /// found by meaning, the passage nearest the query.
    pub hits: Vec<SearchHit>,
}

/// The page stage: places the parts of the leading works in `ranked`'s order and reads what the
/// page's hits show.
pub async fn lay_out(
    reads: &PgPool,
    retrieval: &Retrieval,
    ranked: &Ranked,
    filters: &Filters,
) -> Result<Layout, SearchError> {
    let (served, parts) = parts::placed(reads, &ranked.order, filters).await?;
    let hits = hits(reads, retrieval, &served, &parts).await?;
    Ok(Layout { served, hits })
}

/// The first [`PAGE_SIZE`] of `served_ids` as hits.
async fn hits(
    reads: &PgPool,
    retrieval: &Retrieval,
    served_ids: &[i32],
    parts: &[parts::Part],
) -> Result<Vec<SearchHit>, SearchError> {
    let fused: HashMap<i32, &Fused> = retrieval.fused.iter().map(|f| (f.anime_id, f)).collect();
    let ids: Vec<i32> = served_ids.iter().copied().take(PAGE_SIZE).collect();
    let cards = crate::catalog::pages::cards(reads, &ids).await?;
    // The passage nearest the query, for each hit found by meaning.
    let nearest: Vec<(i32, i32)> = retrieval
        .vector
        .iter()
        .filter(|hit| ids.contains(&hit.anime_id))
        .filter_map(|hit| Some((hit.anime_id, hit.passage_index?)))
        .collect();
    let mut passages = match nearest.is_empty() {
        true => HashMap::new(),
        false => vector::passage_texts(reads, &nearest).await?,
    };
    let lexical: HashMap<i32, &lexical::LexicalHit> =
        retrieval.lexical.iter().map(|h| (h.anime_id, h)).collect();
    Ok(ids
        .iter()
        .filter_map(|id| {
            let matched = lexical.get(id);
            let fused = fused.get(id);
            let part_of = parts
                .iter()
                .find(|p| p.anime_id == *id)
                .and_then(|p| cards.get(&p.of))
                .map(|work| work.title.clone());
            Some(SearchHit {
                anime: cards.get(id)?.clone(),
                branch: fused.map_or(Branch::SameWork, |f| f.branch),
                score: fused.map_or(0.0, |f| f.score),
                lexical_rank: fused.and_then(|f| f.lexical_rank),
                vector_rank: fused.and_then(|f| f.vector_rank),
                matched_title: matched.and_then(|h| h.matched_title.clone()),
                matched_words: matched.map(|h| h.matched_words.clone()).unwrap_or_default(),
                matched_passage: passages.remove(id),
                part_of,
            })
        })
        .collect())
}
