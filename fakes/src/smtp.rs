//! A real SMTP server (mailin-embedded speaks the protocol) that keeps every message it accepts
//! in memory, parsed (mail-parser), so tests read what a mail client would show: subject, the
//! text and HTML bodies decoded from their transfer encoding, recipients, `Message-ID`. It can
//! refuse the next messages with a temporary (451) or permanent (550) error, and be slow, to
//! drive the server's delivery worker through its retry and concurrency paths.
//!
//! `fakes smtp` serves it with a small HTTP endpoint (`GET /messages?to=…`) for the browser suite.

use std::{
    io,
    net::{IpAddr, SocketAddr, TcpListener},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use mailin_embedded::{Handler, Response, Server, response};
use serde::Serialize;

/// A message the server accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// The envelope's sender and recipients (`MAIL FROM`, `RCPT TO`).
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    pub message_id: String,
    /// The text and HTML bodies, decoded.
    pub text: String,
    pub html: String,
    /// The message as sent (headers and MIME parts).
    pub raw: String,
}

#[derive(Default)]
struct Shared {
    inbox: Mutex<Vec<Delivered>>,
    /// Messages still to refuse with 451 (at their recipient).
    refuse_temporarily: AtomicUsize,
    /// Refuse every recipient with 550 while set.
    refuse_permanently: AtomicBool,
    /// Milliseconds to wait before answering the end of DATA.
    delay_ms: AtomicU64,
}

/// One SMTP session's state (mailin-embedded clones the handler for each connection).
#[derive(Clone)]
struct Session {
    shared: Arc<Shared>,
    from: String,
    to: Vec<String>,
    data: Vec<u8>,
}

impl Handler for Session {
    fn mail(&mut self, _ip: IpAddr, _domain: &str, from: &str) -> Response {
        self.from = from.to_string();
        self.to.clear();
        self.data.clear();
        response::OK
    }

    fn rcpt(&mut self, to: &str) -> Response {
        if self.shared.refuse_permanently.load(Ordering::SeqCst) {
            return response::NO_MAILBOX;
        }
        // Refused here rather than at the end of DATA: after a refused DATA, mailin stays in
        // its data state and never answers the client's QUIT.
        let refused = self
            .shared
            .refuse_temporarily
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused {
            return response::INTERNAL_ERROR;
        }
        self.to.push(to.to_string());
        response::OK
    }

    fn data(&mut self, buf: &[u8]) -> io::Result<()> {
        self.data.extend_from_slice(buf);
        Ok(())
    }

    fn data_end(&mut self) -> Response {
        let delay = self.shared.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        let parsed = mail_parser::MessageParser::default().parse(&self.data);
        let delivered = Delivered {
            from: self.from.clone(),
            to: self.to.clone(),
            subject: parsed
                .as_ref()
                .and_then(|m| m.subject())
                .unwrap_or_default()
                .to_string(),
            message_id: parsed
                .as_ref()
                .and_then(|m| m.message_id())
                .unwrap_or_default()
                .to_string(),
            text: parsed
                .as_ref()
                .and_then(|m| m.body_text(0))
                .unwrap_or_default()
                .to_string(),
            html: parsed
                .as_ref()
                .and_then(|m| m.body_html(0))
                .unwrap_or_default()
                .to_string(),
            raw: String::from_utf8_lossy(&self.data).into_owned(),
        };
        self.shared.inbox.lock().unwrap().push(delivered);
        response::OK
    }
}

/// The server, running on a thread of its own for the rest of the process (tests start one
/// each; it holds nothing but its port).
pub struct SmtpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl SmtpServer {
    /// Starts a server on `addr` (port 0: any free port).
    pub fn start(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let mut server = Server::new(Session {
            shared: shared.clone(),
            from: String::new(),
            to: Vec::new(),
            data: Vec::new(),
        });
        server
            .with_name("smtp.zenbu.test")
            .with_tcp_listener(listener);
        std::thread::Builder::new()
            .name(format!("smtp-{}", addr.port()))
            .spawn(move || {
                if let Err(error) = server.serve() {
                    tracing::error!(%error, "SMTP server stopped");
                }
            })?;
        Ok(Self { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL the server's `ZENBU_SMTP_URL` takes (plain SMTP: a local test server).
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    /// Every message accepted so far, oldest first.
    pub fn delivered(&self) -> Vec<Delivered> {
        self.shared.inbox.lock().unwrap().clone()
    }

    /// Messages accepted for `recipient`, newest first.
    pub fn delivered_to(&self, recipient: &str) -> Vec<Delivered> {
        let mut out: Vec<Delivered> = self
            .delivered()
            .into_iter()
            .filter(|m| m.to.iter().any(|to| to.eq_ignore_ascii_case(recipient)))
            .collect();
        out.reverse();
        out
    }

    /// Refuses the next `n` messages' recipients with "451 local error" (a temporary failure).
    pub fn refuse_next(&self, n: usize) {
        self.shared.refuse_temporarily.store(n, Ordering::SeqCst);
    }

    /// Refuses every recipient with "550 mailbox unavailable" (permanent) while `on`.
    pub fn refuse_permanently(&self, on: bool) {
        self.shared.refuse_permanently.store(on, Ordering::SeqCst);
    }

    /// Answers the end of each message only after `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}
