//! The browser entry point: the wasm module exports `hydrate`, which the hydration script that
//! the server puts in every page calls once the module has loaded.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
