import { APIRequestContext, Page, expect } from '@playwright/test';

export const PASSWORD = 'correct horse battery';

/** Where `fakes smtp` shows what it received (playwright.config.ts). */
const smtpHttp = `http://127.0.0.1:${Number(process.env.E2E_PORT ?? '3100') + 3}`;

/** A mail the SMTP server received, as a mail client shows it. */
export interface Delivered {
  to: string[];
  subject: string;
  text: string;
  html: string;
}

/** The newest mail delivered to `email` whose text matches `pattern`, waiting for the app's
 * delivery worker (it looks for queued mail every two seconds). */
export async function deliveredMail(
  request: APIRequestContext,
  email: string,
  pattern: RegExp,
): Promise<Delivered> {
  let found: Delivered | undefined;
  await expect
    .poll(
      async () => {
        const mails: Delivered[] = await (
          await request.get(`${smtpHttp}/messages?to=${encodeURIComponent(email)}`)
        ).json();
        found = mails.find((mail) => pattern.test(mail.text));
        return found !== undefined;
      },
      { timeout: 15_000, message: `a mail to ${email} matching ${pattern}` },
    )
    .toBe(true);
  return found!;
}

/** A new address (the e2e database outlives a run). */
export function newAddress(): string {
  return `e2e-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;
}

/** Signs a new address up through the forms and the link in the delivered mail; the page ends
 * logged in on /account. */
export async function signUp(page: Page, request: APIRequestContext): Promise<string> {
  const email = newAddress();
  await page.goto('/register');
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Sign up' }).click();
  await expect(page).toHaveURL(/\/register\/sent$/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Check your mail');

  const mail = await deliveredMail(request, email, /\/register\/confirm\?token=/);
  const link = /\/register\/confirm\?token=[0-9a-f]+/.exec(mail.text)![0];
  await page.goto(link);
  await page.getByLabel('Choose a password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create my account' }).click();
  await expect(page).toHaveURL(/\/account$/);
  return email;
}
