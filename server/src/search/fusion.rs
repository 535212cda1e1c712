//! Reciprocal rank fusion: each branch's ranked list contributes `1 / (k + rank)` (rank from 1)
//! to every id it holds, and ids are ordered by the sum. Scores of different branches are never
//! compared, only ranks, so neither branch's scale can swamp the other.

use app::search::Branch;

/// The constant from Cormack et al. (2009), the usual choice.
pub const K: f64 = 60.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub anime_id: i32,
    pub score: f64,
    pub branch: Branch,
    /// 1-based ranks in each branch's list.
    pub lexical_rank: Option<usize>,
    pub vector_rank: Option<usize>,
}

/// Fuses two ranked id lists (best first). The branch label says which lists held the id, so
/// an id only the vector branch returned is never labelled lexical.
pub fn rrf(lexical: &[i32], vector: &[i32], k: f64) -> Vec<Fused> {
    let mut fused: Vec<Fused> = Vec::with_capacity(lexical.len() + vector.len());
    let mut add = |id: i32, rank: usize, from_lexical: bool| {
        let share = 1.0 / (k + rank as f64);
        let entry = match fused.iter_mut().position(|f| f.anime_id == id) {
            Some(i) => &mut fused[i],
            None => {
                fused.push(Fused {
                    anime_id: id,
                    score: 0.0,
                    branch: if from_lexical {
                        Branch::Lexical
                    } else {
                        Branch::Vector
                    },
                    lexical_rank: None,
                    vector_rank: None,
                });
                fused.last_mut().expect("just pushed")
            }
        };
        entry.score += share;
        if from_lexical {
            entry.lexical_rank.get_or_insert(rank);
        } else {
            entry.vector_rank.get_or_insert(rank);
        }
        entry.branch = match (entry.lexical_rank, entry.vector_rank) {
            (Some(_), Some(_)) => Branch::Both,
            (Some(_), None) => Branch::Lexical,
            _ => Branch::Vector,
        };
    };
    for (i, &id) in lexical.iter().enumerate() {
        add(id, i + 1, true);
    }
    for (i, &id) in vector.iter().enumerate() {
        add(id, i + 1, false);
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
}
