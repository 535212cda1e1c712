//! Local stand-ins for the external APIs Zenbu talks to, speaking their wire formats (errors and
//! limits included). The server's integration tests drive its real clients against them; the
//! `fakes` binary (`fakes anilist|openai|stripe|smtp`) serves one to the browser suite or a run by
//! hand. A crate of its own so that none of this is compiled into the server users run: the
//! server does not depend on it (only its tests do).

pub mod anilist;
pub mod openai;
pub mod smtp;
pub mod stripe;

use std::net::SocketAddr;

/// A fake's HTTP server running in the background; stopped when dropped.
pub struct Served {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `app` on `addr` (port 0: any free port).
pub async fn serve(app: axum::Router, addr: SocketAddr) -> std::io::Result<Served> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Served { addr, task })
}
