//! The axum application: Leptos pages (server-rendered, hydrated in the browser), the static
//! site files, and the routes that are not pages (`/healthz`).

mod error;

use std::path::Path;

use app::{App, BUNDLE_NAME, shell};
use axum::{Json, Router, extract::FromRef, extract::State, routing::get};
use leptos::config::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};
use serde::Serialize;
use sqlx::PgPool;
use tower_http::trace::TraceLayer;

pub use error::ApiError;

/// Everything a request handler may need; cheap to clone.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: PgPool,
}

impl AppState {
    pub fn new(pool: PgPool, site_root: &Path) -> Self {
        let leptos_options = LeptosOptions::builder()
            .output_name(BUNDLE_NAME)
            .site_root(site_root.to_string_lossy().as_ref())
            .site_pkg_dir("pkg")
            .build();
        Self {
            leptos_options,
            pool,
        }
    }
}

pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let options = state.leptos_options.clone();
    Router::new()
        .route("/healthz", get(healthz))
        .leptos_routes(&state, routes, move || shell(options.clone()))
        // Files under the site root (`/pkg/zenbu.js`, ...) or the app's 404 page.
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

#[derive(Debug, Serialize)]
struct Health {
    status: &'static str,
    postgres: String,
    pgvector: Option<String>,
}

/// Liveness and versions: 200 with the PostgreSQL and pgvector versions, 503 when the database
/// cannot be reached.
async fn healthz(State(pool): State<PgPool>) -> Result<Json<Health>, ApiError> {
    let versions = crate::db::versions(&pool).await?;
    Ok(Json(Health {
        status: "ok",
        postgres: versions.postgres,
        pgvector: versions.pgvector,
    }))
}
