import { test, expect } from '@playwright/test';
import { appReady, callApi, signIn, unique } from './helpers';

// Issue: operator safety (words a person reads). The audit page names what it shows (the
// pipeline, its environment), reads details as fields with dates, and keeps its filters in
// the URL.

test('the audit page shows names and readable details, and keeps its filters in the URL', async ({ page, request }) => {
  await signIn(page);
  const envs = await callApi<{ id: string; name: string }[]>(request, 'environment.list', {});
  const env = envs.find((e) => e.name === 'e2e') ?? envs[0];
  const name = unique('audited');
  const pipeline = await callApi<{ id: string }>(request, 'pipeline.create', { environment_id: env.id, name, node_selector: {} });
  await callApi(request, 'pipeline.deploy', {
    pipeline_id: pipeline.id,
    config_yaml: 'sources: {}\n',
    changelog: 'first',
    reason: 'audit spec',
  });

  await page.goto('/audit');
  await appReady(page);
  await page.getByLabel('Target id').fill(pipeline.id);
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(new RegExp(`/audit\\?target=${pipeline.id}$`));
  const rows = page.getByTestId('audit-table').locator('tbody tr');
  await expect(rows).toHaveCount(2);
  const deployed = page.locator('tr[data-action="pipeline.deploy"]');
  await expect(deployed.getByTestId('audit-target')).toContainText(name);
  await expect(deployed).toContainText(env.name);
  await expect(deployed.locator('dl')).toContainText('Reason');
  await expect(deployed.locator('dl')).toContainText('audit spec');
  await expect(deployed).toContainText(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
  await expect(deployed).not.toContainText('{"');

  // The filter is the URL: a reload (or a shared link) shows the same rows.
  await page.reload();
  await appReady(page);
  await expect(rows).toHaveCount(2);
  await expect(page.getByLabel('Target id')).toHaveValue(pipeline.id);
});
