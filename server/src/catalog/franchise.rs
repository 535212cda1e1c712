//! Franchises: the connected groups of the catalog over its relation edges (prequel, sequel,
//! parent, side story, …), each with a root (the first entry) and a premise that the other
//! members carry in their documents.
//!
//! The local premise is the start of the root's synopsis, cut at sentence boundaries: cheap,
//! deterministic, and true to the source. With an OpenAI key, `premise` writes one with an LLM
//! instead; both are stored per franchise, generator and inputs hash (`store`).

use std::collections::{BTreeMap, HashMap};

use unicode_segmentation::UnicodeSegmentation;

use super::{
    document::{Premise, clean_description},
    media::Media,
};
use sha2::{Digest, Sha256};

/// Relation types that keep two entries in one franchise. ADAPTATION/SOURCE point at manga,
/// CHARACTER links crossovers between unrelated series, OTHER is anything: those do not.
pub const FRANCHISE_RELATIONS: [&str; 9] = [
    "PREQUEL",
    "SEQUEL",
    "PARENT",
    "SIDE_STORY",
    "SPIN_OFF",
    "ALTERNATIVE",
    "SUMMARY",
    "COMPILATION",
    "CONTAINS",
];

/// Name of the local premise generator; stored with each premise, so a change of method gives
/// new rows instead of silently reusing old text.
pub const LOCAL_GENERATOR: &str = "local-lead-sentences-v1";

/// How long a local premise may grow (characters); whole sentences only, at least one.
pub const PREMISE_MAX_CHARS: usize = 320;
/// A synopsis shorter than this says too little to be a premise ("The second season of X.").
const THIN_SYNOPSIS_CHARS: usize = 120;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Franchise {
    pub root_id: i32,
    /// Every member, the root included, in airing order.
    pub members: Vec<i32>,
}

/// Groups the catalog into franchises of two or more entries. Edges to anime outside the
/// catalog are ignored. Deterministic: same catalog, same franchises, same roots.
pub fn franchises(catalog: &[Media]) -> Vec<Franchise> {
    let index: HashMap<i32, usize> = catalog.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
    let mut parent: Vec<usize> = (0..catalog.len()).collect();
    for (i, media) in catalog.iter().enumerate() {
        for edge in media.relation_edges() {
            if !FRANCHISE_RELATIONS.contains(&edge.relation_type.as_str()) {
                continue;
            }
            if let Some(&j) = index.get(&edge.node.id) {
                union(&mut parent, i, j);
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..catalog.len() {
        let root = find(&mut parent, i);
        groups.entry(root).or_default().push(i);
    }
    let mut result: Vec<Franchise> = groups
        .into_values()
        .filter(|members| members.len() > 1)
        .map(|mut members| {
            members.sort_by_key(|&i| airing_key(&catalog[i]));
            let root = members
                .iter()
                .copied()
                .find(|&i| !has_earlier_link(&catalog[i], &index))
                .unwrap_or(members[0]);
            Franchise {
                root_id: catalog[root].id,
                members: members.iter().map(|&i| catalog[i].id).collect(),
            }
        })
        .collect();
    result.sort_by_key(|f| f.root_id);
    result
}

/// The local premise of a franchise: the lead sentences of the root's synopsis, or, when that
/// synopsis is too thin, of the earliest member's that is not.
pub fn local_premise(franchise: &Franchise, by_id: &HashMap<i32, &Media>) -> Option<Premise> {
    let root = by_id.get(&franchise.root_id)?;
    let root_title = root.main_title()?.to_string();
    let synopsis = std::iter::once(franchise.root_id)
        .chain(franchise.members.iter().copied())
        .filter_map(|id| by_id.get(&id))
        .filter_map(|media| media.description.as_deref())
        .map(clean_description)
        .find(|text| text.chars().count() >= THIN_SYNOPSIS_CHARS)?;
    Some(Premise {
        root_title,
        text: lead_sentences(&synopsis, PREMISE_MAX_CHARS),
    })
}

/// Hash of what a premise is made from (root title and the members' synopses), so a stored
/// premise is reused exactly while its inputs are unchanged.
pub fn premise_inputs_hash(franchise: &Franchise, by_id: &HashMap<i32, &Media>) -> String {
    let mut hasher = Sha256::new();
    for id in std::iter::once(franchise.root_id).chain(franchise.members.iter().copied()) {
        if let Some(media) = by_id.get(&id) {
            hasher.update(id.to_le_bytes());
            hasher.update(media.main_title().unwrap_or_default().as_bytes());
            hasher.update([0]);
            hasher.update(media.description.as_deref().unwrap_or_default().as_bytes());
            hasher.update([0]);
        }
    }
    hex::encode(hasher.finalize())
}

/// Whole sentences from the start of `text`, as many as fit in `max_chars` (at least one; a
/// first sentence longer than that is cut at a word boundary and marked with "…").
pub fn lead_sentences(text: &str, max_chars: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    for sentence in flat.unicode_sentences() {
        let sentence = sentence.trim();
        if sentence.is_empty() {
            continue;
        }
        let next_len =
            out.chars().count() + usize::from(!out.is_empty()) + sentence.chars().count();
        if next_len > max_chars {
            if out.is_empty() {
                let mut cut = String::new();
                for word in sentence.split(' ') {
                    if cut.chars().count() + word.chars().count() + 2 > max_chars {
                        break;
                    }
                    if !cut.is_empty() {
                        cut.push(' ');
                    }
                    cut.push_str(word);
                }
                out = format!("{cut}…");
            }
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(sentence);
    }
    out
}

fn has_earlier_link(media: &Media, index: &HashMap<i32, usize>) -> bool {
    media.relation_edges().iter().any(|edge| {
        matches!(edge.relation_type.as_str(), "PREQUEL" | "PARENT")
            && index.contains_key(&edge.node.id)
    })
}

/// Airing order; unknown dates last, then by id.
fn airing_key(media: &Media) -> (i32, i32, i32, i32) {
    let date = media.start_date.unwrap_or_default();
    (
        date.year.or(media.season_year).unwrap_or(i32::MAX),
        date.month.unwrap_or(13),
        date.day.unwrap_or(32),
        media.id,
    )
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}

/// A smaller catalog that keeps every anime in `keep` and fills up to about `target` anime with
/// other whole franchises (and standalone anime), chosen by a hash of their first id so the
/// choice is stable. Whole franchises keep every document identical to its full-catalog
/// version (premises come from the franchise), so vectors are shared between the two.
pub fn subset(catalog: &[Media], keep: &[i32], target: usize) -> Vec<Media> {
    let mut group_of: HashMap<i32, usize> = HashMap::new();
    let mut groups: Vec<Vec<i32>> = Vec::new();
    for franchise in franchises(catalog) {
        for &member in &franchise.members {
            group_of.insert(member, groups.len());
        }
        groups.push(franchise.members);
    }
    for media in catalog {
        if let std::collections::hash_map::Entry::Vacant(slot) = group_of.entry(media.id) {
            slot.insert(groups.len());
            groups.push(vec![media.id]);
        }
    }
    let mut chosen = vec![false; groups.len()];
    let mut size = 0;
    for id in keep {
        if let Some(&g) = group_of.get(id).filter(|&&g| !chosen[g]) {
            chosen[g] = true;
            size += groups[g].len();
        }
    }
    let mut order: Vec<usize> = (0..groups.len()).filter(|&g| !chosen[g]).collect();
    let rank = |g: usize| {
        let first = groups[g].iter().min().copied().unwrap_or_default();
        Sha256::digest(first.to_le_bytes())
    };
    order.sort_by_cached_key(|&g| rank(g));
    for g in order {
        if size >= target {
            break;
        }
        chosen[g] = true;
        size += groups[g].len();
    }
    catalog
        .iter()
        .filter(|m| chosen[group_of[&m.id]])
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn media(id: i32, year: i32, title: &str, description: &str, edges: &[(&str, i32)]) -> Media {
        serde_json::from_value(json!({
            "id": id,
            "title": {"romaji": title},
            "startDate": {"year": year, "month": 1, "day": 1},
            "description": description,
            "relations": {"edges": edges.iter().map(|(kind, to)| json!({
                "relationType": kind, "node": {"id": to, "type": "ANIME"}
            })).collect::<Vec<_>>()}
        }))
        .unwrap()
    }

    const LONG: &str = "Mob is a middle schooler with enormous psychic power who keeps it bottled up. \
        He works for a self-proclaimed psychic con man named Reigen. Whenever his emotions reach \
        one hundred percent, something terrible happens. He wants to be popular.";

    fn mob_catalog() -> Vec<Media> {
        vec![
            media(
                3,
                2022,
                "Mob Psycho 100 III",
                "The third season.",
                &[("PREQUEL", 2)],
            ),
            media(
                1,
                2016,
                "Mob Psycho 100",
                LONG,
                &[("SEQUEL", 2), ("ADAPTATION", 999)],
            ),
            media(
                2,
                2019,
                "Mob Psycho 100 II",
                "The second season.",
                &[("PREQUEL", 1), ("SEQUEL", 3)],
            ),
            media(4, 2018, "Mob Psycho Mini", "Shorts.", &[("PARENT", 1)]),
            media(10, 2005, "Mushishi", LONG, &[]),
            media(20, 2010, "Crossover A", "x", &[("CHARACTER", 10)]),
        ]
    }

    #[test]
    fn groups_follow_franchise_relations_only() {
        let franchises = franchises(&mob_catalog());
        assert_eq!(
            franchises,
            vec![Franchise {
                root_id: 1,
                members: vec![1, 4, 2, 3]
            }]
        );
    }

    #[test]
    fn root_is_the_first_entry_without_a_prequel_or_parent() {
        // Even when a side story is dated earlier than the first season, it has a PARENT.
        let mut catalog = mob_catalog();
        catalog[3] = media(4, 2010, "Mob Psycho Mini", "Shorts.", &[("PARENT", 1)]);
        assert_eq!(franchises(&catalog)[0].root_id, 1);
    }

    #[test]
    fn premise_comes_from_the_root_synopsis_in_whole_sentences() {
        let catalog = mob_catalog();
        let by_id: HashMap<i32, &Media> = catalog.iter().map(|m| (m.id, m)).collect();
        let premise = local_premise(&franchises(&catalog)[0], &by_id).unwrap();
        assert_eq!(premise.root_title, "Mob Psycho 100");
        assert!(premise.text.starts_with("Mob is a middle schooler"));
        assert!(premise.text.ends_with('.'));
        assert!(premise.text.chars().count() <= PREMISE_MAX_CHARS);
        // Deterministic.
        assert_eq!(
            premise,
            local_premise(&franchises(&catalog)[0], &by_id).unwrap()
        );
    }

    #[test]
    fn thin_root_synopsis_falls_back_to_a_member_that_says_more() {
        let catalog = vec![
            media(1, 2000, "Root", "A film.", &[("SEQUEL", 2)]),
            media(2, 2001, "Second", LONG, &[("PREQUEL", 1)]),
        ];
        let by_id: HashMap<i32, &Media> = catalog.iter().map(|m| (m.id, m)).collect();
        let premise = local_premise(&franchises(&catalog)[0], &by_id).unwrap();
        assert_eq!(premise.root_title, "Root");
        assert!(premise.text.starts_with("Mob is a middle schooler"));
    }

    #[test]
    fn lead_sentences_respects_the_budget() {
        assert_eq!(lead_sentences("One. Two. Three.", 9), "One. Two.");
        assert_eq!(lead_sentences("One. Two. Three.", 100), "One. Two. Three.");
        let long = "word ".repeat(100);
        let cut = lead_sentences(&long, 30);
        assert!(cut.ends_with('…') && cut.chars().count() <= 30, "{cut}");
    }

    #[test]
    fn inputs_hash_changes_when_a_synopsis_does() {
        let mut catalog = mob_catalog();
        let hash = |catalog: &[Media]| {
            let by_id: HashMap<i32, &Media> = catalog.iter().map(|m| (m.id, m)).collect();
            premise_inputs_hash(&franchises(catalog)[0], &by_id)
        };
        let before = hash(&catalog);
        assert_eq!(before, hash(&catalog));
        catalog[2].description = Some("The second season, retold.".into());
        assert_ne!(before, hash(&catalog));
    }

    #[test]
    fn a_subset_keeps_whole_franchises_and_is_stable() {
        let demo = crate::catalog::import::demo_catalog();
        let small = subset(&demo, &[457], 100);
        let again = subset(&demo, &[457], 100);
        let ids = |c: &[Media]| c.iter().map(|m| m.id).collect::<Vec<_>>();
        assert_eq!(ids(&small), ids(&again));
        assert!(
            small.len() >= 100 && small.len() < demo.len(),
            "{}",
            small.len()
        );
        assert!(small.iter().any(|m| m.id == 457));
        // Every franchise the subset touches is there whole, with the same root.
        let full = franchises(&demo);
        for part in franchises(&small) {
            let whole = full.iter().find(|f| f.root_id == part.root_id).unwrap();
            assert_eq!(part.members, whole.members);
        }
        let mushishi = full.iter().find(|f| f.members.contains(&457)).unwrap();
        assert!(
            mushishi
                .members
                .iter()
                .all(|id| small.iter().any(|m| m.id == *id))
        );
    }
}
