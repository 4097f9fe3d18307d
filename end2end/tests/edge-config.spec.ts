import { test, expect, APIRequestContext, Page } from '@playwright/test';
import { admin, bearer, signIn, unique } from './helpers';

// Issue: rolling rollouts, and issue 14 (edge config): the admin page's bucket lookup, a
// percent change that is saved only after its routing preview is confirmed (with an optional
// comment the history shows), org overrides, percents outside 0-100 refused inline, and a
// delete confirmed by typing the rollout's name.
test.beforeEach(async ({ page }) => {
  await signIn(page);
});

/** Opens the page and waits until it is interactive: the bucket lookup runs in the browser
 * only once the page hydrated (the same bucket as Bun.hash: cus_abc123 is in bucket 63). */
async function openEdgeConfig(page: Page) {
  await page.goto('/admin/edge-config');
  await expect(async () => {
    await page.getByLabel('Customer id').fill('cus_abc123');
    await expect(page.getByTestId('lookup-bucket')).toHaveText('Bucket 63', { timeout: 1_000 });
  }).toPass();
}

async function createRollout(request: APIRequestContext, percent: number): Promise<string> {
  const name = unique('cache');
  const created = await request.put(`/api/admin/rollouts/${name}`, { data: { percent }, headers: bearer() });
  expect(created.status()).toBe(200);
  return name;
}

test('edge-config confirmation and comment: Save shows the routing preview, the comment lands in the history', async ({ page, request }) => {
  const name = await createRollout(request, 20);
  await openEdgeConfig(page);
  const card = page.getByRole('article', { name: `Rollout ${name}` });
  await expect(card).toContainText('now 20% (was 0%');

  // Enter in the field never saves; the live preview names the buckets that move.
  const percent = card.getByLabel('Global percent number');
  await percent.fill('35');
  await expect(card.getByTestId('percent-preview')).toHaveText('20% -> 35%: buckets 20..34 switch to the new path');
  await percent.press('Enter');
  await expect(card.getByTestId('confirm-change')).toHaveCount(0);

  // Save only opens the confirmation: nothing is written until "Confirm save".
  await card.getByRole('button', { name: 'Save', exact: true }).click();
  const confirm = card.getByRole('group', { name: 'Confirm routing change' });
  await expect(confirm.getByTestId('routing-preview')).toContainText(`${name}: 20% -> 35% of customers`);
  await expect(confirm.getByTestId('routing-preview')).toContainText('Buckets 20..34 switch to the new path');
  let doc = await (await request.get('/api/edge-config', { headers: bearer() })).json();
  expect(doc.rollouts[name].global.percent, 'not saved before confirming').toBe(20);

  // Cancel leaves everything as it was; Save again, with a comment, and confirm.
  await confirm.getByRole('button', { name: 'Cancel' }).click();
  await expect(card.getByTestId('confirm-change')).toHaveCount(0);
  await card.getByRole('button', { name: 'Save', exact: true }).click();
  await confirm.getByLabel('Comment (optional)').fill('ramp after the load test');
  await confirm.getByRole('button', { name: 'Confirm save' }).click();
  await expect(card).toContainText('now 35% (was 20%');
  const history = page.getByTestId('edge-history');
  await expect(history.locator('tbody tr').first()).toContainText(name);
  await expect(history.locator('tbody tr').first()).toContainText(`20% -> 35% by ${admin.email}: ramp after the load test`);
  // With its date, and never the raw audit JSON.
  await expect(history.locator('tbody tr').first()).toContainText(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
  await expect(history).not.toContainText('previousPercent');

  // An org override goes through the same confirmation, and so does removing it.
  await card.getByLabel('Org', { exact: true }).fill('org_big');
  await card.getByLabel('Percent', { exact: true }).fill('5');
  await card.getByRole('button', { name: 'Set override' }).click();
  await expect(confirm.getByTestId('routing-preview')).toContainText(
    `${name}: override added for org_big: 35% (the global percent) -> 5% of its customers`,
  );
  await confirm.getByRole('button', { name: 'Confirm save' }).click();
  await expect(card.locator('tr[data-org="org_big"]')).toContainText('5%');
  doc = await (await request.get('/api/edge-config', { headers: bearer() })).json();
  expect(doc.rollouts[name].global.percent).toBe(35);
  expect(doc.rollouts[name].orgs.org_big.percent).toBe(5);
  await expect(history.locator('tbody tr').first()).toContainText(`override for org_big added at 5% by ${admin.email}`);

  await card.locator('tr[data-org="org_big"]').getByRole('button', { name: 'Remove' }).click();
  await expect(confirm.getByTestId('routing-preview')).toContainText('override removed for org_big: 5% -> 35% (the global percent)');
  await confirm.getByLabel('Comment (optional)').fill('back to the global ramp');
  await confirm.getByRole('button', { name: 'Confirm save' }).click();
  await expect(card.locator('tr[data-org="org_big"]')).toHaveCount(0);
  await expect(history.locator('tbody tr').first()).toContainText(
    `override for org_big removed (was 5%) by ${admin.email}: back to the global ramp`,
  );
});

test('a percent outside 0-100 is refused inline and never previewed clamped', async ({ page, request }) => {
  const name = await createRollout(request, 50);
  await openEdgeConfig(page);
  const card = page.getByRole('article', { name: `Rollout ${name}` });
  const percent = card.getByLabel('Global percent number');

  await percent.fill('150');
  await expect(percent).toHaveAttribute('aria-invalid', 'true');
  await expect(card.locator('.percent-field').first()).toContainText('150 is out of range: enter 0 to 100');
  await expect(card.getByRole('button', { name: 'Save', exact: true })).toBeDisabled();
  await expect(card.getByTestId('percent-preview')).toHaveText('');
  await expect(card).not.toContainText('50% -> 100%');

  // Back in range, the message goes and Save works again.
  await percent.fill('60');
  await expect(percent).toHaveAttribute('aria-invalid', 'false');
  await expect(card.locator('.field-error')).toHaveCount(0);
  await expect(card.getByRole('button', { name: 'Save', exact: true })).toBeEnabled();

  // The override's percent and a new rollout's are refused the same way.
  await card.getByLabel('Org', { exact: true }).fill('org_big');
  const orgPercent = card.getByLabel('Percent', { exact: true });
  await orgPercent.fill('-5');
  await expect(orgPercent).toHaveAttribute('aria-invalid', 'true');
  await expect(card.getByRole('button', { name: 'Set override' })).toBeDisabled();
  const create = page.getByRole('region', { name: 'New rollout' });
  await create.getByLabel('New rollout name').fill(unique('new'));
  await create.getByLabel('Percent', { exact: true }).fill('101');
  await expect(create).toContainText('101 is out of range: enter 0 to 100');
  await expect(create.getByRole('button', { name: 'Create rollout' })).toBeDisabled();

  const doc = await (await request.get('/api/edge-config', { headers: bearer() })).json();
  expect(doc.rollouts[name].global.percent).toBe(50);
});

test('a rollout is deleted from its danger zone only once its name is typed exactly', async ({ page, request }) => {
  const name = await createRollout(request, 30);
  await openEdgeConfig(page);
  const card = page.getByRole('article', { name: `Rollout ${name}` });
  const danger = card.getByRole('region', { name: 'Danger zone' });
  const del = danger.getByRole('button', { name: 'Delete rollout' });
  await expect(del).toBeDisabled();

  const typed = danger.getByLabel(`Type ${name} to confirm`);
  await typed.fill(name.slice(0, -1));
  await expect(del).toBeDisabled();
  await typed.press('Enter');
  await expect(card).not.toContainText('DELETED');

  await typed.fill(name);
  await expect(del).toBeEnabled();
  await del.click();
  await expect(card).toContainText('DELETED');
  await expect(card.getByRole('region', { name: 'Danger zone' })).toHaveCount(0);
  await expect(page.getByTestId('edge-history').locator('tbody tr').first()).toContainText(`deleted: 30% -> 0% by ${admin.email}`);
  const doc = await (await request.get('/api/edge-config', { headers: bearer() })).json();
  expect(doc.rollouts[name].global.percent).toBe(0);
});
