import { test, expect } from '@playwright/test';
import { bearer, signIn, unique } from './helpers';

// Issue: rolling rollouts. The admin page: bucket lookup, a previewed percent change that
// records the previous percent, an org override, and the audited history.
test.beforeEach(async ({ page }) => {
  await signIn(page);
});

test('an admin previews and saves a percent change, sets an org override and looks up a customer', async ({ page, request }) => {
  const name = unique('cache');
  const created = await request.put(`/api/admin/rollouts/${name}`, { data: { percent: 20 }, headers: bearer() });
  expect(created.status()).toBe(200);

  await page.goto('/admin/edge-config');
  const card = page.getByRole('article', { name: `Rollout ${name}` });
  await expect(card).toContainText('now 20% (was 0%');

  // The lookup uses the same bucket as Bun.hash: cus_abc123 is in bucket 63.
  await page.getByLabel('Customer id').fill('cus_abc123');
  await expect(page.getByTestId('lookup-bucket')).toHaveText('Bucket 63');

  // Preview, then save: buckets 20..34 switch; the card records 20 as the previous percent.
  await card.getByLabel('Global percent number').fill('35');
  await expect(card.getByTestId('percent-preview')).toHaveText('20% -> 35%: buckets 20..34 switch to the new path');
  await card.getByRole('button', { name: 'Save' }).click();
  await expect(card).toContainText('now 35% (was 20%');

  // An org override, shown in the card and in the published document.
  await card.getByLabel('Org', { exact: true }).fill('org_big');
  await card.getByLabel('Percent', { exact: true }).fill('5');
  await card.getByRole('button', { name: 'Set override' }).click();
  await expect(card.locator('tr[data-org="org_big"]')).toContainText('5%');
  const doc = await (await request.get('/api/edge-config', { headers: bearer() })).json();
  expect(doc.rollouts[name].global.percent).toBe(35);
  expect(doc.rollouts[name].orgs.org_big.percent).toBe(5);

  // Removing it asks first, and the history records every change.
  page.once('dialog', (d) => d.accept());
  await card.locator('tr[data-org="org_big"]').getByRole('button', { name: 'Remove' }).click();
  await expect(card.locator('tr[data-org="org_big"]')).toHaveCount(0);
  await expect(page.getByTestId('edge-history')).toContainText('rollout.org.remove');
});
