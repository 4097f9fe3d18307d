import { test, expect } from '@playwright/test';
import { appReady, callApi, createPipeline, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: the live agent channel. Every node has a page, linked from the fleet and the
// pipeline views: who it is, what it runs, what its agent says of itself, its logs.
// Two components to sample: the simulated agent answers with generated events.
const CONFIG = 'sources:\n  in: {type: stdin}\nsinks:\n  out: {type: console, inputs: [in]}\n# node page\n';

test.describe('node page', () => {
  let agent: AgentProcess | undefined;
  test.afterEach(async () => {
    await agent?.stop();
    agent = undefined;
  });

  test('a simulated node opens from the fleet, shows what it runs and its agent health, and answers samples and taps', async ({ page, request, baseURL }) => {
    await signIn(page);
    const run = unique('node');
    const host = `${run}-a`;
    agent = startAgent(baseURL!, ['--simulate', '1', '--hostname-template', host, '--label', `e2e-run=${run}`]);
    const pipelineId = await createPipeline(page, run, 'nodepage');
    await callApi(request, 'pipeline.deploy', { pipeline_id: pipelineId, config_yaml: CONFIG, changelog: 'v1' });

    await page.goto(`/?name=${host}`);
    await appReady(page);
    await page.getByRole('link', { name: host, exact: true }).click();
    await expect(page).toHaveURL(/\/nodes\/[^/]+$/);
    await appReady(page);
    await expect(page.getByTestId('node-name')).toContainText(host);
    await expect(page.getByTestId('node-facts')).toContainText(`e2e-run=${run}`);
    // The page refreshes by itself until the agent reports this run's pipeline running (other
    // specs' pipelines may select every node, so the row is found by its link).
    const row = page.getByTestId('node-pipelines').locator('tr', { has: page.locator(`a[href="/pipelines/${pipelineId}"]`) });
    await expect(row).toContainText('v1', { timeout: 30_000 });
    await expect(row).toContainText('Running', { timeout: 30_000 });
    await expect(page.getByTestId('agent-health')).toContainText('agentHealth.pushConnected');
    await expect(page.getByText('No host metrics reported.')).toBeVisible();

    // Sample events: the node answers with events of both components and their fields.
    const live = page.locator(`[data-testid="live-pipeline"][data-pipeline="${pipelineId}"]`);
    await live.getByTestId('sample-events').click();
    const results = live.getByTestId('sample-results');
    await expect(results.locator('[data-component="in"]')).toContainText('10 events', { timeout: 15_000 });
    await expect(results.locator('[data-component="out"]')).toContainText('10 events');
    await expect(results.getByTestId('sample-schema').first()).toContainText('.message');
    await expect(results.getByTestId('sample-events-list').first()).toContainText('HTTP/1.1');

    // A live tap streams one component's events until stopped.
    await live.getByTestId('tap').click();
    await expect(live.getByTestId('tap-events')).toContainText('"component":"in"', { timeout: 15_000 });
    await expect(live.getByTestId('tap')).toHaveText('Stop tap');
    await live.getByTestId('tap').click();
    await expect(live.getByTestId('tap-view')).toContainText('ended (stopped');
    await page.screenshot({ path: 'test-results/screenshots/node-page.png', fullPage: true });

    // The pipeline's nodes table links back to the node.
    await row.getByRole('link').click();
    await appReady(page);
    await expect(page.getByTestId('pipeline-nodes').getByRole('link', { name: host })).toHaveAttribute('href', /\/nodes\//);
  });
});
