import { test, expect } from '@playwright/test';
import { appReady, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: foundation. Two simulated agents report in on the fleet page; a pipeline created and
// deployed through the UI ends up running on both, as the agents themselves report it.
test.describe('fleet and direct deploy', () => {
  let agents: AgentProcess | undefined;
  test.beforeEach(async ({ page }) => {
    await signIn(page);
  });
  test.afterEach(async () => {
    await agents?.stop();
  });

  test('two agents report in, a deployed version runs on both', async ({ page, baseURL }) => {
    const prefix = unique('fleet');
    agents = startAgent(baseURL!, ['--simulate', '2', '--hostname-template', `${prefix}-{i}`, '--label', 'tier=e2e']);

    // Both nodes report in on the fleet page (it refreshes by itself), filtered to this run's
    // nodes by name: the filter goes into the URL and the summary still counts every node.
    await page.goto('/');
    await appReady(page);
    await page.getByLabel('Name contains').fill(prefix);
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect(page).toHaveURL(new RegExp(`name=${prefix}`));
    await expect(page.getByTestId('fleet-summary')).toContainText('nodes in');
    for (const i of [0, 1]) {
      const row = page.locator(`tr[data-node="${prefix}-${i}"]`);
      await expect(row).toBeVisible();
      await expect(row.getByText('Healthy')).toBeVisible();
    }

    // Create a pipeline for these nodes only. The button only works once the app hydrated.
    const pipeline = unique('logs');
    await page.getByRole('link', { name: 'Pipelines' }).click();
    await appReady(page);
    await page.getByLabel('Name').fill(pipeline);
    await page.getByLabel(/Node selector/).fill('tier=e2e');
    await page.getByRole('button', { name: 'Create pipeline' }).click();
    await page.getByRole('status').getByRole('link', { name: pipeline }).click();
    await expect(page.getByRole('heading', { level: 1, name: pipeline })).toBeVisible();
    await expect(page.getByTestId('deployed-version')).toHaveText('not deployed');

    // Deploy a first version through the form: "Deploy now" is a choice (the dialog opens on
    // a progressive rollout) and asks for confirmation naming the node count, then a reason.
    const asked: string[] = [];
    page.on('dialog', (d) => {
      asked.push(d.message());
      void d.accept();
    });
    await page.getByRole('radio', { name: 'Deploy now' }).check();
    await page.getByLabel('Config (YAML)').fill('sources:\n  in:\n    type: demo_logs\n');
    await page.getByLabel('Changelog').fill('first version');
    await page.getByRole('button', { name: 'Deploy now' }).click();
    await expect(page.getByRole('status')).toHaveText('Deployed v1');
    const named = /^Deploy this config to all (\d+) nodes at once, without a canary\?$/.exec(asked[0]);
    expect(Number(named?.[1])).toBeGreaterThanOrEqual(2);
    await expect(page.getByTestId('deployed-version')).toHaveText('v1');

    // Both agents report v1 RUNNING, as shown on the pipeline page and the fleet page.
    for (const i of [0, 1]) {
      const row = page.getByTestId('pipeline-nodes').locator(`tr[data-node="${prefix}-${i}"]`);
      await expect(row).toHaveAttribute('data-running', 'v1');
      await expect(row.getByText('Running')).toBeVisible();
    }
    await page.goto(`/?name=${prefix}`);
    await appReady(page);
    await expect(page.locator('tr[data-node]')).toHaveCount(2);
    for (const i of [0, 1]) {
      const item = page.locator(`tr[data-node="${prefix}-${i}"] li[data-pipeline="${pipeline}"]`);
      await expect(item).toHaveAttribute('data-version', 'v1');
    }
  });

  test('without the WebAssembly bundle the create button does nothing, so the spec above proves hydration', async ({ page }) => {
    await page.route('**/*.wasm', (route) => route.abort());
    await page.goto('/pipelines');
    const name = unique('nohydrate');
    await page.getByLabel('Name').fill(name);
    await page.getByRole('button', { name: 'Create pipeline' }).click();
    await expect(page.getByRole('status')).toHaveCount(0);
  });
});
