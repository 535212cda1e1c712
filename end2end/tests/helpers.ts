import { APIRequestContext, Page, expect } from '@playwright/test';

export const PASSWORD = 'correct horse battery';

/** Signs a new address up through the forms and the emailed link (read from the dev mailbox);
 * the page ends logged in on /account. The e2e database outlives a run: a new address each time. */
export async function signUp(page: Page, request: APIRequestContext): Promise<string> {
  const email = `e2e-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;
  await page.goto('/register');
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Sign up' }).click();
  await expect(page).toHaveURL(/\/register\/sent$/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Check your mail');

  const mails = await (await request.get(`/dev/mail?to=${encodeURIComponent(email)}`)).json();
  const link = /\/register\/confirm\?token=[0-9a-f]+/.exec(mails[0].body)![0];
  await page.goto(link);
  await page.getByLabel('Choose a password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create my account' }).click();
  await expect(page).toHaveURL(/\/account$/);
  return email;
}
