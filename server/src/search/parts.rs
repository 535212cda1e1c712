//! Parts of the leading works: the films, OVAs and later seasons named after an anime the page
//! ranks near its top ("Made in Abyss" and "Made in Abyss Movie 1: Tabidachi no Yoake"), placed
//! after the first [`PARTS_AFTER`] results.
//!
//! A description of a work fits its recap film or its remake as well as its series, so people
//! looking for one are often looking for any of them; yet the shared catalog links no relation
//! for most films and recaps, and such an entry's own synopsis may share little with the
//! description, so neither branch returns it. Its title says it is part of the work
//! ([`crate::catalog::titles::same_work`]). The first results stay as ranked: a part only takes
//! a place below them, ahead of the weaker tail of the page.

use app::search::Filters;
use sqlx::PgPool;

use super::filters;

/// [`SearchParams`](super::params::SearchParams)`::page.leading_works`.
pub const LEADING_WORKS: usize = super::params::PARAMS.page.leading_works;
/// [`SearchParams`](super::params::SearchParams)`::page.parts_per_work`.
pub const PARTS_PER_WORK: usize = super::params::PARAMS.page.parts_per_work;
/// [`SearchParams`](super::params::SearchParams)`::page.max_parts`.
pub const MAX_PARTS: usize = super::params::PARAMS.page.max_parts;
/// [`SearchParams`](super::params::SearchParams)`::page.parts_after`.
pub const PARTS_AFTER: usize = super::params::PARAMS.page.parts_after;

/// A part to place: the anime, and the leading result it is a part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub anime_id: i32,
    pub of: i32,
}

/// The parts of the first [`LEADING_WORKS`] of `order` that the filters let through and that are
/// not already among its first [`PARTS_AFTER`], best known first within each work.
pub async fn of_leading(
    pool: &PgPool,
    order: &[i32],
    filters: &Filters,
) -> Result<Vec<Part>, sqlx::Error> {
    let leading: Vec<i32> = order.iter().take(LEADING_WORKS).copied().collect();
    if leading.is_empty() {
        return Ok(Vec::new());
    }
    // Two titles of one work share their first four characters: the shorter is at least that
    // long (`titles::MIN_BASE_CHARS`) and begins the longer. The leaders' heads (as PostgreSQL
    // lower-cases them, so that the index of migration 24 is what the second query reads)
    // narrow the catalog to a few rows; `same_work` decides.
    let leaders: Vec<(i32, Vec<String>, Vec<String>)> = sqlx::query_as(
        "SELECT a.id, array_remove(ARRAY[a.title_romaji, a.title_english], NULL),
                ARRAY(SELECT DISTINCT left(lower(t), 4)
                      FROM unnest(ARRAY[a.title_romaji, a.title_english]) AS t WHERE t IS NOT NULL)
         FROM anime a WHERE a.id = ANY($1)",
    )
    .bind(&leading)
    .fetch_all(pool)
    .await?;
    let heads: Vec<String> = leaders.iter().flat_map(|(_, _, h)| h.clone()).collect();
    let sql = format!(
        "SELECT a.id, array_remove(ARRAY[a.title_romaji, a.title_english], NULL) AS titles
         FROM anime a
         WHERE (left(lower(a.title_romaji), 4) = ANY($1) OR left(lower(a.title_english), 4) = ANY($1))
               {}
         ORDER BY coalesce(greatest(a.popularity, a.estimated_popularity), 0) DESC, a.id",
        filters::sql(2)
    );
    let query = sqlx::query_as::<_, (i32, Vec<String>)>(&sql).bind(&heads);
    let rows = filters::bind(query, filters).fetch_all(pool).await?;
    // In the page's order; a leader deleted since has no row and no parts.
    let leading_titles: Vec<(i32, Vec<String>)> = leading
        .iter()
        .filter_map(|id| {
            let (_, titles, _) = leaders.iter().find(|(row, _, _)| row == id)?;
            Some((*id, titles.clone()))
        })
        .collect();
    Ok(pick(order, &leading_titles, &rows))
}

/// The parts among `catalog` (id and titles, best known first) of each leading work, within
/// the caps, leaving out what the head of `order` already shows.
fn pick(
    order: &[i32],
    leading: &[(i32, Vec<String>)],
    catalog: &[(i32, Vec<String>)],
) -> Vec<Part> {
    let shown = &order[..order.len().min(PARTS_AFTER)];
    let mut parts: Vec<Part> = Vec::new();
    for (of, titles) in leading {
        // An entry with neither a romaji nor an English title has no parts.
        if titles.is_empty() {
            continue;
        }
        let mine = catalog
            .iter()
            .filter(|(id, _)| id != of && !shown.contains(id))
            .filter(|(id, _)| !parts.iter().any(|p| p.anime_id == *id))
            .filter(|(_, other)| crate::catalog::titles::same_work(titles, other))
            .take(PARTS_PER_WORK)
            .map(|(id, _)| Part {
                anime_id: *id,
                of: *of,
            })
            .collect::<Vec<_>>();
        parts.extend(mine);
    }
    parts.truncate(MAX_PARTS);
    parts
}

/// `order` as the page serves it, with the parts of its leading works placed, and those parts.
pub async fn placed(
    pool: &PgPool,
    order: &[i32],
    filters: &Filters,
) -> Result<(Vec<i32>, Vec<Part>), sqlx::Error> {
    let parts = of_leading(pool, order, filters).await?;
    Ok((place(order, &parts), parts))
}

/// `order` with `parts` placed after its first [`PARTS_AFTER`] (moved up from lower down if
/// they were there); nothing else changes place.
pub fn place(order: &[i32], parts: &[Part]) -> Vec<i32> {
    let head = order.len().min(PARTS_AFTER);
    let is_part = |id: &i32| parts.iter().any(|p| p.anime_id == *id);
    order[..head]
        .iter()
        .copied()
        .chain(parts.iter().map(|p| p.anime_id))
        .chain(order[head..].iter().copied().filter(|id| !is_part(id)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn parts_go_after_the_head_and_are_moved_not_copied() {
        let order: Vec<i32> = (1..=15).collect();
        let parts = [
            Part {
                anime_id: 100,
                of: 1,
            },
            Part {
                anime_id: 13,
                of: 2,
            },
        ];
        let placed = place(&order, &parts);
        assert_eq!(&placed[..10], &order[..10]);
        assert_eq!(&placed[10..12], &[100, 13]);
        assert_eq!(&placed[12..], &[11, 12, 14, 15]);
        // A short page: the parts simply follow it.
        assert_eq!(place(&[1, 2], &parts), vec![1, 2, 100, 13]);
        assert_eq!(place(&order, &[]), order);
    }

    #[test]
    fn only_parts_of_the_leading_works_within_the_caps() {
        let abyss = titles(&["Made in Abyss"]);
        let catalog = vec![
            (50, titles(&["Made in Abyss Movie 1: Tabidachi no Yoake"])),
            (51, titles(&["Made in Abyss Movie 2: Hourou Suru Tasogare"])),
            (
                52,
                titles(&["Made in Abyss Movie 3: Fukaki Tamashii no Reimei"]),
            ),
            (53, titles(&["Made in Heaven"])),
            (60, titles(&["Mononoke Hime"])),
        ];
        let order = vec![1, 2, 3, 4];
        let leading = vec![(1, abyss), (2, titles(&["Mononoke"]))];
        let parts = pick(&order, &leading, &catalog);
        // The best known two of the three films; not another work sharing the first words.
        assert_eq!(
            parts,
            vec![
                Part {
                    anime_id: 50,
                    of: 1
                },
                Part {
                    anime_id: 51,
                    of: 1
                }
            ]
        );
        // A part already in the head of the page stays where it is.
        let parts = pick(&[1, 50, 2], &leading, &catalog);
        assert_eq!(
            parts,
            vec![
                Part {
                    anime_id: 51,
                    of: 1
                },
                Part {
                    anime_id: 52,
                    of: 1
                }
            ]
        );
    }

    #[test]
    fn at_most_max_parts_in_all() {
        let catalog: Vec<(i32, Vec<String>)> = (0..3)
            .flat_map(|w| {
                (1..=3).map(move |n| (100 * (w + 1) + n, titles(&[&format!("Work{w} Movie {n}")])))
            })
            .collect();
        let leading: Vec<(i32, Vec<String>)> = (0..3)
            .map(|w| (w + 1, titles(&[&format!("Work{w}")])))
            .collect();
        let parts = pick(&[1, 2, 3], &leading, &catalog);
        assert_eq!(parts.len(), MAX_PARTS);
        assert_eq!(
            parts.iter().map(|p| p.of).collect::<Vec<_>>(),
            vec![1, 1, 2, 2]
        );
    }
}
