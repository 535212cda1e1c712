# Shared by scripts/run, scripts/test and scripts/build-site: where caches live and how the
# pieces are built. Sourced, not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# The same .env the server reads, so that scripts and server agree on folders and ports.
if [ -f .env ]; then set -a; source .env; set +a; fi

# Downloads (PostgreSQL wheel, wasm-bindgen CLI) and the cargo target directory live outside the
# checkout so that every clone on this machine, CI's included, reuses them.
export ZENBU_CACHE_DIR=${ZENBU_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zenbu}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ZENBU_CACHE_DIR/target}
export ZENBU_SITE_ROOT=${ZENBU_SITE_ROOT:-$ROOT/target/site}
# Absolute, so every command (and the EXIT trap of scripts/test, run from end2end/) means the same
# cluster whatever its working directory.
export ZENBU_DATA_DIR=${ZENBU_DATA_DIR:-$ROOT/.data}
TOOLS_DIR=$ZENBU_CACHE_DIR/tools

step() { printf '\n==> %s\n' "$*" >&2; }

# cargo build/test with --release when PROFILE=release.
PROFILE=${PROFILE:-debug}
cargo_profile_args() { [ "$PROFILE" = release ] && echo --release || true; }
server_bin() { echo "$CARGO_TARGET_DIR/$PROFILE/server"; }
# The fakes of AniList, OpenAI and Stripe (`fakes anilist|openai|stripe`), a binary of their own.
fakes_bin() { echo "$CARGO_TARGET_DIR/$PROFILE/fakes"; }

ensure_toolchain() {
  command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    step "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  # The CLI must be the exact version of the wasm-bindgen crate in Cargo.lock.
  local version
  version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
  if ! "$TOOLS_DIR/bin/wasm-bindgen" --version 2>/dev/null | grep -qx "wasm-bindgen $version"; then
    step "installing wasm-bindgen-cli $version into $TOOLS_DIR (once; a few minutes)"
    # Not --locked: one of its locked dependency versions is missing from the registry.
    cargo install wasm-bindgen-cli --version "$version" --root "$TOOLS_DIR" --force
  fi
}

# The browser bundle: the frontend crate compiled to wasm, wasm-bindgen's JS glue, the CSS and
# the files of public/, laid out in $ZENBU_SITE_ROOT the way the server serves them.
build_site() {
  local wasm_profile_args=() wasm_dir=debug
  if [ "$PROFILE" = release ]; then wasm_profile_args=(--profile wasm-release); wasm_dir=wasm-release; fi
  step "building the browser bundle ($wasm_dir)"
  cargo build -p frontend --lib --target wasm32-unknown-unknown "${wasm_profile_args[@]}"
  local staging="$ZENBU_SITE_ROOT.new"
  rm -rf "$staging" && mkdir -p "$staging/pkg"
  cp -R public/. "$staging/"
  "$TOOLS_DIR/bin/wasm-bindgen" --target web --no-typescript --out-name zenbu \
    --out-dir "$staging/pkg" "$CARGO_TARGET_DIR/wasm32-unknown-unknown/$wasm_dir/frontend.wasm"
  cp style/main.css "$staging/pkg/zenbu.css"
  rm -rf "$ZENBU_SITE_ROOT" && mv "$staging" "$ZENBU_SITE_ROOT"
}

# Debian's Apertium Spanish-English pair: the server also reads Spanish queries in English
# (server/src/search/translate.rs). Installed when missing and this is root, as in CI; otherwise
# returns 1 after saying how to install it.
ensure_apertium() {
  [ -f /usr/share/apertium/apertium-eng-spa/spa-eng.autobil.bin ] && command -v lt-proc >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing Apertium's Spanish-English pair (apt-get install apertium-eng-spa)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends apertium-eng-spa
  else
    echo "apertium-eng-spa is missing (sudo apt-get install apertium-eng-spa): Spanish queries are searched as typed, without their English reading" >&2
    return 1
  fi
}

# Debian's WordNet database: English query words also match their synonyms
# (server/src/search/thesaurus.rs). Installed when missing and this is root, as in CI; otherwise
# returns 1 after saying how to install it.
ensure_wordnet() {
  [ -f /usr/share/wordnet/data.noun ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing WordNet (apt-get install wordnet-base)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wordnet-base
  else
    echo "wordnet-base is missing (sudo apt-get install wordnet-base): query words match only themselves, not their synonyms" >&2
    return 1
  fi
}

# The server and the fakes in one cargo invocation, whichever script asks: cargo unifies
# dependency features per invocation, and built apart the two would compile tokio, hyper,
# reqwest, axum and serde twice over with different features (67 crates, 1m42 on a fresh
# 2-core machine), and again whenever a developer alternates scripts/run and scripts/test.
build_server() {
  step "building the server and the fakes ($PROFILE)"
  cargo build -p server -p fakes $(cargo_profile_args)
}

# Lints the workspace's crates while they are built: clippy-driver compiles them in rustc's
# place (what `cargo clippy` does in a check-only build), so every later cargo build and test in
# this shell lints what it compiles, warnings as errors. A separate `cargo clippy` checked every
# dependency a second time (166 s of a fresh run on this machine). Dependencies are built by
# rustc as before; the workspace's own crates are rebuilt (~90 s) when a build without the
# wrapper (scripts/run, a plain cargo build) comes between.
lint_while_building() {
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
  RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver)
  export RUSTC_WORKSPACE_WRAPPER
  # How cargo clippy hands its arguments to clippy-driver.
  export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}
