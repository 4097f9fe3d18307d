import { test, expect } from '@playwright/test';
import { callApi, createPipeline, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: operator safety. Pausing a rollout stops its bake countdown, says who paused it and
// why; resuming starts the countdown again from the time that was left.

test.describe('pause and resume', () => {
  let agent: AgentProcess | undefined;
  test.afterEach(async () => {
    await agent?.stop();
    agent = undefined;
  });

  test('pause stops the bake countdown with a reason and resume restarts it', async ({ page, request, baseURL }) => {
    await signIn(page);
    const run = unique('pz');
    agent = startAgent(baseURL!, ['--simulate', '1', '--hostname-template', `${run}-a`, '--label', `e2e-run=${run}`]);
    const pipelineId = await createPipeline(page, run, 'pause');
    await callApi(request, 'pipeline.deploy', { pipeline_id: pipelineId, config_yaml: 'sources: {}\n# v1\n', changelog: 'v1' });
    await callApi(request, 'release.canary.create', {
      pipeline_id: pipelineId,
      config_yaml: 'sources: {}\n# v2\n',
      changelog: 'v2',
      rollout_plan: { stages: [{ selector: { percentage: 100 }, bakeSeconds: 600, gates: [{ healthWindow: {} }] }] },
    });
    const countdown = page.getByTestId('bake-countdown');
    await expect(countdown).toContainText('bake ends in');

    page.on('dialog', (d) => d.accept(d.type() === 'prompt' ? 'waiting for the DB migration' : undefined));
    await page.getByRole('button', { name: 'Pause' }).click();
    await expect(page.getByTestId('paused')).toContainText('Paused by admin@e2e.test for 0 min: waiting for the DB migration');
    await expect(countdown).toContainText('bake stopped with');
    const stopped = await countdown.textContent();
    // It stands still across refreshes of the page.
    await page.waitForTimeout(3_000);
    await expect(countdown).toHaveText(stopped!);
    await expect(page.getByRole('button', { name: 'Advance next stage' })).toHaveCount(0);
    await expect(page.getByTestId('rollout').getByTestId('notes')).toContainText('pause by admin@e2e.test');

    await page.getByRole('button', { name: 'Resume' }).click();
    await expect(page.getByTestId('paused')).toHaveCount(0);
    await expect(countdown).toContainText('bake ends in');
    const first = await countdown.textContent();
    await expect(countdown).not.toHaveText(first!, { timeout: 5_000 });

    await page.getByRole('button', { name: 'Roll back' }).click();
    await expect(page.getByTestId('rollout')).toHaveAttribute('data-status', 'ROLLED_BACK');
    await expect(page.getByTestId('latest-release')).toHaveText('v2: Rolled back');
    await expect(page.getByTestId('elapsed')).toContainText(/^took \d+:\d{2}$/);

    // A direct deploy afterwards: the header and the card say the release no longer is what
    // the fleet runs (v3 is the rollback's copy of v1).
    await callApi(request, 'pipeline.deploy', { pipeline_id: pipelineId, config_yaml: 'sources: {}\n# v4\n', changelog: 'v4' });
    await expect(page.getByTestId('deployed-version')).toHaveText('v4');
    await expect(page.getByTestId('superseded')).toContainText('Since this release, v4 was deployed directly by');
    await expect(page.getByTestId('rollout').getByRole('heading', { level: 2 })).toHaveText('Latest release (superseded)');
  });
});
