//! AniList's `Media` object, as the GraphQL API returns it and as `media.jsonl` files store it.
//! Field names follow AniList (camelCase); missing values are `null` or empty lists there, so
//! everything optional is an `Option` or defaults to empty.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Media {
    pub id: i32,
    #[serde(default)]
    pub id_mal: Option<i32>,
    #[serde(default)]
    pub title: Title,
    #[serde(default, rename = "type")]
    pub media_type: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub synonyms: Vec<String>,
    #[serde(default)]
    pub season: Option<String>,
    #[serde(default)]
    pub season_year: Option<i32>,
    #[serde(default)]
    pub start_date: Option<FuzzyDate>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub genres: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tags: Vec<Tag>,
    #[serde(default)]
    pub average_score: Option<i32>,
    #[serde(default)]
    pub popularity: Option<i32>,
    #[serde(default)]
    pub is_adult: Option<bool>,
    #[serde(default)]
    pub relations: Option<Relations>,
    /// The poster, in AniList's sizes (the shared catalog has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cover_image: Option<CoverImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner_image: Option<String>,
}

/// AniList's `coverImage`: the poster's URLs and its average colour (`#rrggbb`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoverImage {
    #[serde(default)]
    pub extra_large: Option<String>,
    #[serde(default)]
    pub large: Option<String>,
    #[serde(default)]
    pub medium: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Title {
    #[serde(default)]
    pub romaji: Option<String>,
    #[serde(default)]
    pub english: Option<String>,
    #[serde(default)]
    pub native: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FuzzyDate {
    #[serde(default)]
    pub year: Option<i32>,
    #[serde(default)]
    pub month: Option<i32>,
    #[serde(default)]
    pub day: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tag {
    pub name: String,
    #[serde(default)]
    pub rank: Option<i32>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub is_general_spoiler: Option<bool>,
    #[serde(default)]
    pub is_media_spoiler: Option<bool>,
}

impl Tag {
    pub fn is_spoiler(&self) -> bool {
        self.is_general_spoiler.unwrap_or(false) || self.is_media_spoiler.unwrap_or(false)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Relations {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub edges: Vec<RelationEdge>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelationEdge {
    pub relation_type: String,
    pub node: RelationNode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationNode {
    pub id: i32,
    #[serde(default, rename = "type")]
    pub media_type: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
}

impl Media {
    pub fn is_adult(&self) -> bool {
        self.is_adult.unwrap_or(false)
    }

    /// The year it aired: the season year, else the start date's year.
    pub fn year(&self) -> Option<i32> {
        self.season_year
            .or(self.start_date.and_then(|date| date.year))
    }

    pub fn relation_edges(&self) -> &[RelationEdge] {
        self.relations
            .as_ref()
            .map(|r| r.edges.as_slice())
            .unwrap_or_default()
    }

    /// This entry with U+0000 removed from every string. PostgreSQL's text and jsonb cannot
    /// hold it, so one such character anywhere used to fail a whole import (found by fuzzing).
    pub fn without_nul(&self) -> Media {
        fn scrub(value: &mut serde_json::Value) {
            match value {
                serde_json::Value::String(text) if text.contains('\0') => {
                    *text = text.replace('\0', "")
                }
                serde_json::Value::Array(items) => items.iter_mut().for_each(scrub),
                serde_json::Value::Object(fields) => fields.values_mut().for_each(scrub),
                _ => {}
            }
        }
        let mut value = serde_json::to_value(self).expect("Media serialises");
        scrub(&mut value);
        serde_json::from_value(value).expect("Media with fewer characters still deserialises")
    }

    /// The title the catalog shows first: romaji, else English, else native.
    pub fn main_title(&self) -> Option<&str> {
        [&self.title.romaji, &self.title.english, &self.title.native]
            .into_iter()
            .flatten()
            .map(|t| t.trim())
            .find(|t| !t.is_empty())
    }
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_anilist_shape_with_nulls() {
        let json = r#"{"id": 457, "idMal": 457,
            "title": {"romaji": "Mushishi", "english": "Mushi-Shi", "native": "蟲師"},
            "type": "ANIME", "format": "TV", "synonyms": null, "season": "FALL", "seasonYear": 2005,
            "startDate": {"year": 2005, "month": 10, "day": null}, "description": null,
            "genres": ["Adventure"], "tags": [{"name": "Historical", "rank": 80, "category": "Theme",
            "isGeneralSpoiler": false, "isMediaSpoiler": false}], "averageScore": 85,
            "popularity": 620736, "isAdult": false,
            "relations": {"edges": [{"relationType": "SEQUEL", "node": {"id": 20595, "type": "ANIME", "format": "TV"}}]}}"#;
        let media: Media = serde_json::from_str(json).unwrap();
        assert_eq!(media.id, 457);
        assert!(media.synonyms.is_empty());
        assert_eq!(media.year(), Some(2005));
        assert_eq!(media.main_title(), Some("Mushishi"));
        assert_eq!(media.relation_edges()[0].node.id, 20595);
        assert!(!media.tags[0].is_spoiler());
    }

    #[test]
    fn only_an_id_is_required() {
        let media: Media = serde_json::from_str(r#"{"id": 1}"#).unwrap();
        assert_eq!(media.main_title(), None);
        assert!(media.relation_edges().is_empty());
        assert!(serde_json::from_str::<Media>(r#"{"title": {}}"#).is_err());
    }
}
