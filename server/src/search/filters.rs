//! The filters both branches apply, as one SQL fragment over the `anime` row aliased `a`, so the
//! lexical and the vector branch can never filter differently.

use app::search::Filters;
use sqlx::{Postgres, postgres::PgArguments, query::QueryAs};

/// `AND …` conditions reading parameters `$first` to `$first + 3`.
pub fn sql(first: usize) -> String {
    let (f, y0, y1, g) = (first, first + 1, first + 2, first + 3);
    format!(
        " AND (cardinality(${f}::text[]) = 0 OR a.format = ANY(${f}::text[]))
          AND (${y0}::int IS NULL OR coalesce(a.season_year, a.start_year) >= ${y0}::int)
          AND (${y1}::int IS NULL OR coalesce(a.season_year, a.start_year) <= ${y1}::int)
          AND (cardinality(${g}::text[]) = 0 OR a.genres @> ${g}::text[])"
    )
}

/// Binds the parameters of [`sql`], in order.
pub fn bind<'q, O>(
    query: QueryAs<'q, Postgres, O, PgArguments>,
    filters: &Filters,
) -> QueryAs<'q, Postgres, O, PgArguments> {
    query
        .bind(filters.formats.clone())
        .bind(filters.year_from)
        .bind(filters.year_to)
        .bind(filters.genres.clone())
}
