//! The facets of a described anime: the things a person lists when they describe one ("something
//! calm, about someone who travels alone and helps people"). Each facet usually matches a
//! different sentence of the synopsis, and one vector of the whole description is an average that
//! matches none of them well; the vector branch embeds each facet too, finds the passages nearest
//! each, and adds how well an anime's passages answer every facet to its score.

/// Most facets taken from one query (each costs an embedding and an index walk).
pub const MAX_FACETS: usize = 4;
/// A clause shorter than this many words ("calm", "Japan") is no facet: alone it matches
/// passages at random.
const MIN_FACET_WORDS: usize = 2;
/// Punctuation that ends a clause.
const CLAUSE_ENDS: [char; 8] = [',', ';', '.', ':', '!', '?', '(', ')'];
/// Coordinating conjunctions that join two remembered things, in both languages.
const CONJUNCTIONS: [&str; 7] = ["and", "but", "or", "y", "e", "pero", "o"];

/// The query's clauses, split at punctuation and coordinating conjunctions, each of at least
/// [`MIN_FACET_WORDS`] words, at most [`MAX_FACETS`]; empty when fewer than two (a one-clause
/// query is its own single facet, already embedded whole).
pub fn facets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut keep = |words: &mut Vec<&str>| {
        if words.len() >= MIN_FACET_WORDS {
            out.push(words.join(" "));
        }
        words.clear();
    };
    for clause in text.split(CLAUSE_ENDS) {
        let mut words: Vec<&str> = Vec::new();
        for word in clause.split_whitespace() {
            if CONJUNCTIONS.contains(&word.to_lowercase().as_str()) {
                keep(&mut words);
            } else {
                words.push(word);
            }
        }
        keep(&mut words);
    }
    if out.len() < 2 {
        out.clear();
    }
    out.truncate(MAX_FACETS);
    out
}

/// What [`facets`] depends on, for the results cache's pipeline fingerprint.
pub fn fingerprint() -> String {
    format!("{MAX_FACETS}|{MIN_FACET_WORDS}|{CONJUNCTIONS:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_splits_into_what_it_lists() {
        assert_eq!(
            facets("something calm, about someone who travels alone and helps people"),
            vec![
                "something calm",
                "about someone who travels alone",
                "helps people"
            ]
        );
        assert_eq!(
            facets("un pistolero rubio de abrigo rojo, pero es bien payaso y no quiere matar"),
            vec![
                "un pistolero rubio de abrigo rojo",
                "es bien payaso",
                "no quiere matar"
            ]
        );
    }

    #[test]
    fn one_clause_or_single_words_make_no_facets() {
        assert!(facets("a boy who pilots a giant robot").is_empty());
        assert!(facets("calm, lonely, sad").is_empty());
        assert!(facets("naruto").is_empty());
        assert!(facets("").is_empty());
    }

    #[test]
    fn a_long_list_keeps_the_first_four() {
        let query = "a pirate crew, a rubber boy, a straw hat, a treasure hunt, a big sea";
        assert_eq!(facets(query).len(), MAX_FACETS);
        assert_eq!(facets(query)[0], "a pirate crew");
    }
}
