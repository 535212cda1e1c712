import { defineConfig } from '@playwright/test';

// scripts/test builds the server and the fakes and passes their paths; the suite starts the
// server on its own port with its own database in the embedded PostgreSQL, and stops it
// afterwards.
const port = process.env.E2E_PORT ?? '3100';
// The fake Stripe (`fakes stripe`): Checkout and the portal are its pages; it signs and
// delivers webhooks to the app.
const stripePort = String(Number(port) + 1);
const stripeSecret = 'whsec_e2e_secret';
// A real SMTP server (`fakes smtp`) the app delivers its mail to; the tests read what arrived
// from its HTTP side (helpers.ts, `deliveredMail`).
const smtpPort = String(Number(port) + 2);
export const smtpHttpPort = String(Number(port) + 3);
// The fake AniList (`fakes anilist --posters`) as the image host: the demo catalog's posters are
// filled in from it before the server starts (`server ingest --refresh-images`), except for ids
// divisible by 3 (no poster on AniList); those divisible by 5 answer 500 (a broken upstream).
const anilistPort = String(Number(port) + 4);
const server = process.env.ZENBU_SERVER_BIN;
const fakes = process.env.ZENBU_FAKES_BIN;
if (!server || !fakes) {
  throw new Error('ZENBU_SERVER_BIN or ZENBU_FAKES_BIN is not set: run the suite through scripts/test');
}

export default defineConfig({
  testDir: './tests',
  outputDir: './test-results',
  timeout: 30_000,
  workers: 1,
  // The HTML report keeps what tests attach (the accessibility check's screenshots).
  reporter: [['list'], ['html', { open: 'never', outputFolder: 'playwright-report' }]],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    // English unless a test asks for Spanish (the UI follows Accept-Language).
    locale: 'en-US',
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    launchOptions: {
      // Debian's Chromium: Playwright's own browser downloads cannot work here.
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      // --no-sandbox because CI runs as root; the rest keep Chromium off the (closed) network.
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
  webServer: [
  {
    command: `"${fakes}" smtp --listen 127.0.0.1:${smtpPort} --http 127.0.0.1:${smtpHttpPort}`,
    cwd: '..',
    port: Number(smtpHttpPort),
    timeout: 60_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
  },
  {
    command: `"${fakes}" stripe --listen 127.0.0.1:${stripePort} --api-key sk_test_e2e --price-id price_test_premium --webhook-secret ${stripeSecret} --webhook-url http://127.0.0.1:${port}/stripe/webhook`,
    cwd: '..',
    port: Number(stripePort),
    timeout: 60_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
  },
  {
    command: `"${fakes}" anilist --from server/data/demo_catalog.jsonl --listen 127.0.0.1:${anilistPort} --requests-per-minute 100000 --posters --posters-missing-every 3 --posters-broken-every 5`,
    cwd: '..',
    url: `http://127.0.0.1:${anilistPort}/img/large/1.png`,
    timeout: 60_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
  },
  {
    command: `"${server}" ingest --demo && "${server}" ingest --refresh-images --anilist-url http://127.0.0.1:${anilistPort}/ --requests-per-minute 100000 && exec "${server}" serve`,
    cwd: '..',
    url: `http://127.0.0.1:${port}/healthz`,
    timeout: 300_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      ZENBU_ADDR: `127.0.0.1:${port}`,
      ZENBU_PG_DATABASE: 'zenbu_e2e',
      // Blank, not unset: a developer's .env must not point the suite at another database.
      DATABASE_URL: '',
      // Mail goes out over SMTP, as on a real server; the tests read it where it arrived.
      ZENBU_SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
      ZENBU_MAIL_FROM: 'Zenbu <no-reply@zenbu.test>',
      // Every browser context is a new anonymous visitor from 127.0.0.1.
      ZENBU_NEW_VISITORS_PER_NETWORK: '100000',
      ZENBU_ANONYMOUS_SEARCHES_PER_NETWORK: '100000',
      ZENBU_REQUESTS_PER_NETWORK_PER_SECOND: '100000',
      ZENBU_REQUEST_BURST_PER_NETWORK: '100000',
      ZENBU_PUBLIC_URL: `http://127.0.0.1:${port}`,
      STRIPE_SECRET_KEY: 'sk_test_e2e',
      STRIPE_PRICE_ID: 'price_test_premium',
      STRIPE_WEBHOOK_SECRET: stripeSecret,
      STRIPE_API_BASE: `http://127.0.0.1:${stripePort}`,
      ZENBU_IMAGE_HOSTS: `127.0.0.1:${anilistPort}`,
    },
  },
  ],
});
