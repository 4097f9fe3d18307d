import { test, expect } from '@playwright/test';
import { appReady, callApi, signIn, unique } from './helpers';

// Issue: operator safety. A frozen environment shows a banner on its pages and refuses a
// rollout in the stated words; an admin may go through the freeze with a reason. Stopping
// the line shows its own banner until an admin lifts it. Everything happens in an
// environment of its own, so no other spec meets the freeze.

/** A UTC date `offset` days from today, as YYYY-MM-DD. */
function day(offset: number): string {
  return new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
}

test('a frozen environment shows its banner and refuses a rollout unless an admin overrides with a reason', async ({ page, request }) => {
  await signIn(page);
  const envName = unique('frozen');
  const env = await callApi<{ id: string }>(request, 'environment.create', { name: envName });

  await page.goto(`/environments?env=${envName}`);
  await appReady(page);
  await page.getByLabel('When').fill(`${day(-1)} - ${day(1)} UTC`);
  await page.getByLabel('Reason').fill('year-end freeze');
  await page.getByRole('button', { name: 'Add freeze window' }).click();
  const window = page.getByTestId('freeze-window');
  await expect(window).toContainText(`${day(-1)} - ${day(1)} UTC`);
  await expect(window).toContainText('open');

  const pipeline = await callApi<{ id: string }>(request, 'pipeline.create', {
    environment_id: env.id,
    name: unique('frz'),
    node_selector: {},
  });
  await page.goto(`/pipelines/${pipeline.id}`);
  await appReady(page);
  const banner = page.getByTestId('freeze-banner');
  await expect(banner).toContainText(`${envName} is frozen until`);
  await expect(banner).toContainText('year-end freeze');

  const reasons: string[] = [];
  page.on('dialog', (d) => {
    reasons.push(d.message());
    void d.accept(d.type() === 'prompt' ? 'security fix INC-9' : undefined);
  });
  await page.getByLabel('Config (YAML)').fill('sources: {}\n');
  await page.getByLabel('Changelog').fill('during the freeze');
  await page.getByRole('button', { name: 'Start rollout' }).click();
  await expect(page.getByRole('alert')).toContainText(`cannot start a release: ${envName} is frozen`);
  await expect(page.getByRole('alert')).toContainText('an admin may override with a reason');

  // The admin overrides: asked why, and the freeze no longer stands in the way (this
  // environment has no nodes, which is the next thing the server says).
  await page.getByTestId('override-freeze').getByRole('checkbox').check();
  await page.getByRole('button', { name: 'Start rollout' }).click();
  await expect(page.getByRole('alert')).toContainText('targets no node');
  expect(reasons).toContain('Why go through the freeze? (required)');
});

test('stopping the line shows a banner on the environment pages until it is lifted', async ({ page, request }) => {
  await signIn(page);
  const envName = unique('line');
  await callApi(request, 'environment.create', { name: envName });
  page.on('dialog', (d) => void d.accept(d.type() === 'prompt' ? 'incident 42' : undefined));

  await page.goto(`/environments?env=${envName}`);
  await appReady(page);
  await page.getByTestId('stop-line').click();
  await expect(page.getByRole('status').filter({ hasText: 'paused' })).toContainText('0 releases paused');
  await page.goto(`/pipelines?env=${envName}`);
  await expect(page.getByTestId('hold-banner')).toContainText(`The line of ${envName} is stopped`);
  await expect(page.getByTestId('hold-banner')).toContainText('by admin@e2e.test');
  await expect(page.getByTestId('hold-banner')).toContainText('incident 42');

  await page.goto(`/environments?env=${envName}`);
  await appReady(page);
  await page.getByTestId('lift-line').click();
  await expect(page.getByTestId('stop-line')).toBeVisible();
  await page.goto(`/pipelines?env=${envName}`);
  await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
  await expect(page.getByTestId('hold-banner')).toHaveCount(0);
});
