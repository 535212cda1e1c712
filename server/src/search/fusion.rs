//! Reciprocal rank fusion: each branch's ranked list contributes `1 / (k + rank)` (rank from 1)
//! to every id it holds, and ids are ordered by the sum. Scores of different branches are never
//! compared, only ranks, so neither branch's scale can swamp the other.

use app::search::Branch;

/// [`SearchParams`](super::params::SearchParams)`::fusion.k`.
pub const K: f64 = super::params::PARAMS.fusion.k;

#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub anime_id: i32,
    pub score: f64,
    pub branch: Branch,
    /// 1-based ranks in each branch's list.
    pub lexical_rank: Option<usize>,
    pub vector_rank: Option<usize>,
    /// Rank in the second view's list ([`super::second_view`]), when it runs.
    pub second_rank: Option<usize>,
}

/// Which list a rank came from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum List {
    Lexical,
    Vector,
    Second,
}

/// Fuses two ranked id lists (best first). The branch label says which lists held the id, so
/// an id only the vector branch returned is never labelled lexical.
pub fn rrf(lexical: &[i32], vector: &[i32], k: f64) -> Vec<Fused> {
    rrf_with_second(lexical, vector, &[], k)
}

/// [`rrf`] with the second view's list as a third: a list like the others (its ranks, not its
/// cosines, count). Both dense lists are found by meaning, so an id only the second view
/// returned is labelled [`Branch::Vector`].
pub fn rrf_with_second(lexical: &[i32], vector: &[i32], second: &[i32], k: f64) -> Vec<Fused> {
    let mut fused: Vec<Fused> = Vec::with_capacity(lexical.len() + vector.len() + second.len());
    let mut add = |id: i32, rank: usize, list: List| {
        let share = 1.0 / (k + rank as f64);
        let entry = match fused.iter_mut().position(|f| f.anime_id == id) {
            Some(i) => &mut fused[i],
            None => {
                fused.push(Fused {
                    anime_id: id,
                    score: 0.0,
                    branch: Branch::Lexical,
                    lexical_rank: None,
                    vector_rank: None,
                    second_rank: None,
                });
                fused.last_mut().expect("just pushed")
            }
        };
        entry.score += share;
        match list {
            List::Lexical => entry.lexical_rank.get_or_insert(rank),
            List::Vector => entry.vector_rank.get_or_insert(rank),
            List::Second => entry.second_rank.get_or_insert(rank),
        };
        let by_meaning = entry.vector_rank.is_some() || entry.second_rank.is_some();
        entry.branch = match (entry.lexical_rank, by_meaning) {
            (Some(_), true) => Branch::Both,
            (Some(_), false) => Branch::Lexical,
            _ => Branch::Vector,
        };
    };
    for (list, ids) in [
        (List::Lexical, lexical),
        (List::Vector, vector),
        (List::Second, second),
    ] {
        for (i, &id) in ids.iter().enumerate() {
            add(id, i + 1, list);
        }
    }
    // Ties (same ranks mirrored) keep the id order stable: lower id first.
    fused.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.anime_id.cmp(&b.anime_id))
    });
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_add_up_and_labels_follow_the_lists() {
        let fused = rrf(&[1, 2, 3], &[3, 4], K);
        let by_id = |id| fused.iter().find(|f| f.anime_id == id).unwrap();
        assert_eq!(fused[0].anime_id, 3, "in both lists beats first of one");
        assert_eq!(by_id(3).branch, Branch::Both);
        assert!((by_id(3).score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(by_id(1).branch, Branch::Lexical);
        assert_eq!(by_id(4).branch, Branch::Vector);
        assert_eq!(by_id(4).lexical_rank, None);
        assert_eq!(by_id(4).vector_rank, Some(2));
        assert_eq!(fused.len(), 4);
    }

    #[test]
    fn a_vector_only_hit_is_never_labelled_lexical() {
        let fused = rrf(&[10, 11], &[20, 10, 21], K);
        for hit in &fused {
            let in_lexical = [10, 11].contains(&hit.anime_id);
            let in_vector = [20, 10, 21].contains(&hit.anime_id);
            let expected = match (in_lexical, in_vector) {
                (true, true) => Branch::Both,
                (true, false) => Branch::Lexical,
                (false, true) => Branch::Vector,
                (false, false) => unreachable!(),
            };
            assert_eq!(hit.branch, expected, "id {}", hit.anime_id);
        }
    }

    #[test]
    fn the_second_view_adds_its_ranks_and_counts_as_meaning() {
        let fused = rrf_with_second(&[1, 2], &[3], &[2, 4], K);
        let by_id = |id| fused.iter().find(|f| f.anime_id == id).unwrap();
        assert_eq!(fused[0].anime_id, 2, "in two lists beats first of one");
        assert!((by_id(2).score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(by_id(2).branch, Branch::Both);
        assert_eq!(by_id(2).second_rank, Some(1));
        assert_eq!(by_id(4).branch, Branch::Vector, "second view only");
        assert_eq!(
            (by_id(4).vector_rank, by_id(4).second_rank),
            (None, Some(2))
        );
        assert_eq!(by_id(1).second_rank, None);
        assert_eq!(
            rrf_with_second(&[1, 2], &[3], &[], K),
            rrf(&[1, 2], &[3], K),
            "an empty second list changes nothing"
        );
    }
}
